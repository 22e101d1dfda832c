"""/api/schema/ and /api/docs/: answered like every endpoint, Swagger UI served by the app."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from rest_framework.test import APIClient

from django_ledger.api.views.schema import SIDECAR
from tests.support.api_helpers import error_code

pytest_plugins = ["tests.support.api_fixtures"]


def fresh_cache() -> dict[str, Any]:
    """CACHES with a local-memory cache of its own: no throttle count of another test."""
    location = f"throttles-{uuid.uuid4().hex}"
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": location,
        }
    }


SCHEMA = "/api/schema/"
DOCS = "/api/docs/"
#: Each way to ask: the schema as YAML (its default) and as JSON, and the docs page.
PAGES = [(SCHEMA, {}), (SCHEMA, {"format": "json"}), (SCHEMA, {"format": "yaml"}), (DOCS, {})]
PAGE_IDS = ["schema-yaml", "schema-json", "schema-format-yaml", "docs"]


def assert_json_error(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    assert error_code(response) == code


@pytest.mark.parametrize(("page", "query"), PAGES, ids=PAGE_IDS)
def test_an_anonymous_call_is_401_in_the_apis_shape(
    api_anonymous: APIClient, page: str, query: dict[str, str]
) -> None:
    response = api_anonymous.get(page, query)
    assert_json_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize(("page", "query"), PAGES, ids=PAGE_IDS)
def test_a_bad_token_is_401_authentication_failed(
    api_anonymous: APIClient, page: str, query: dict[str, str]
) -> None:
    api_anonymous.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert_json_error(api_anonymous.get(page, query), 401, "authentication_failed")


@pytest.mark.parametrize(("page", "query"), PAGES, ids=PAGE_IDS)
def test_a_signed_in_user_without_permissions_reads_them(
    api_client_for: Any, page: str, query: dict[str, str]
) -> None:
    response = api_client_for().get(page, query)
    assert response.status_code == 200


def test_the_schema_answers_yaml_or_json(api_root: APIClient) -> None:
    yaml = api_root.get(SCHEMA)
    assert yaml["Content-Type"].startswith("application/vnd.oai.openapi")
    assert yaml.content.startswith(b"openapi: 3.")
    json = api_root.get(SCHEMA, {"format": "json"})
    assert json["Content-Type"].startswith("application/vnd.oai.openapi+json")
    assert "/api/token/" in json.json()["paths"]


def test_other_refusals_are_in_the_apis_shape_too(api_root: APIClient, settings: Any) -> None:
    assert_json_error(
        api_root.get(DOCS, headers={"Accept": "application/json"}), 406, "not_acceptable"
    )
    assert_json_error(api_root.get(SCHEMA, {"format": "html"}), 404, "not_found")
    assert_json_error(api_root.post(SCHEMA, {}, format="json"), 405, "method_not_allowed")
    settings.CACHES = fresh_cache()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"ledger.read": "1/min"},
    }
    assert api_root.get(DOCS).status_code == 200
    response = api_root.get(SCHEMA)
    assert_json_error(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0


def page_assets(html: str) -> list[str]:
    """Every script, stylesheet and icon the page loads."""
    return re.findall(r'<(?:script|link)[^>]*?(?:src|href)="([^"]+)"', html)


def test_the_docs_page_loads_swagger_ui_from_the_apps_static_files(api_root: APIClient) -> None:
    response = api_root.get(DOCS)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assets = page_assets(html)
    expected = {
        f"/static/{SIDECAR}{name}"
        for name in (
            "swagger-ui.css",
            "swagger-ui-bundle.js",
            "swagger-ui-standalone-preset.js",
            "favicon-32x32.png",
        )
    }
    assert set(assets) == expected
    assert "cdn" not in html.lower() and "@latest" not in html
    assert '"/api/schema/"' in html
    # Every one of them is a static file the app ships (drf-spectacular-sidecar).
    for asset in assets:
        found = finders.find(asset.removeprefix("/static/"))
        assert found, asset


def test_the_docs_page_ignores_a_cdn_in_the_spectacular_settings(api_root: APIClient) -> None:
    from drf_spectacular.settings import patched_settings

    cdn = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@latest"
    with patched_settings({"SWAGGER_UI_DIST": cdn, "SWAGGER_UI_FAVICON_HREF": cdn + "/f.png"}):
        html = api_root.get(DOCS).content.decode()
    assert all(asset.startswith(f"/static/{SIDECAR}") for asset in page_assets(html))
