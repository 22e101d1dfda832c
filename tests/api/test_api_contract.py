"""The API's contract holds whatever the project's REST_FRAMEWORK defaults say.

Twice: with ``override_settings`` (what DRF reads on every request: the exception
handler, throttle rates, ...), and in a process whose settings differ from the start,
since DRF reads most defaults (authentication, permissions, parsers, renderers) once,
when ``rest_framework.views`` is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.response import Response
from rest_framework.test import APIClient

from django_ledger import Ledger
from tests.support.api_helpers import error_code, post_json

pytest_plugins = ["tests.support.api_fixtures"]

ROOT = Path(__file__).resolve().parents[2]

#: Defaults as far from the API's own as DRF allows.
HOSTILE: dict[str, Any] = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.FormParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.BrowsableAPIRenderer"],
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.AnonRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"anon": "1/day"},
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "rest_framework.negotiation.BaseContentNegotiation",
    "DEFAULT_VERSIONING_CLASS": "rest_framework.versioning.NamespaceVersioning",
    # The project's own schema class: the ledger's views bring drf-spectacular's.
    "DEFAULT_SCHEMA_CLASS": "rest_framework.schemas.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "tests.api.test_api_contract.hostile_handler",
    "STRICT_JSON": False,
    "UNICODE_JSON": False,
    "COMPACT_JSON": False,
}


def hostile_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """An exception handler that answers every error as a teapot."""
    return Response({"hostile": True}, status=418)


def test_the_contract_holds_under_overridden_defaults(
    api_root: APIClient, api_anonymous: APIClient, api_ledger: Ledger
) -> None:
    with override_settings(REST_FRAMEWORK=HOSTILE):
        for path in ("/api/queues/", "/api/queues/default/stats/", "/api/schema/", "/api/docs/"):
            response = api_anonymous.get(path)
            assert response.status_code == 401, (path, response.content)
            assert error_code(response) == "not_authenticated"
            assert response["WWW-Authenticate"] == "Token"
        anonymous = post_json(api_anonymous, "/api/queues/default/admit/", {"payload": "p"})
        assert anonymous.status_code == 401
        assert api_ledger.stats().total == 0

        admitted = post_json(
            api_root, "/api/queues/default/admit/", {"request_id": "r1", "payload": "é"}
        )
        assert admitted.status_code == 201
        assert admitted["Content-Type"] == "application/json"
        assert '"payload":"é"' in admitted.content.decode()  # compact, UTF-8 as ever
        form = api_root.post("/api/queues/default/admit/", {"request_id": "r2", "payload": "p"})
        assert form.status_code == 415
        assert error_code(form) == "unsupported_media_type"
        nan = api_root.generic(
            "POST",
            "/api/queues/default/admit/",
            b'{"request_id": "r3", "payload": "p", "delay": NaN}',
            content_type="application/json",
        )
        assert error_code(nan) == "parse_error"
        assert api_root.get("/api/schema/", {"format": "json"}).status_code == 200
        assert api_root.get("/api/docs/").status_code == 200
        assert error_code(post_json(api_anonymous, "/api/token/", {})) == "invalid"
    assert api_ledger.stats().total == 1


SETTINGS = """
from testproject.settings import *  # noqa: F403

REST_FRAMEWORK = {rest_framework!r}
REST_FRAMEWORK["EXCEPTION_HANDLER"] = "hostile_settings.hostile_handler"
DATABASES = {{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}}}
LEDGER = {{**LEDGER, "NAMESPACE": {namespace!r}}}  # noqa: F405


def hostile_handler(exc, context):
    from rest_framework.response import Response

    return Response({{"hostile": True}}, status=418)
"""

SCRIPT = """
import json

import django

django.setup()

from django.contrib.auth.models import User
from django.core.management import call_command
from django.test.utils import setup_test_environment
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

setup_test_environment()
call_command("migrate", verbosity=0)
root = User.objects.create_superuser("root", "root@example.com", "pw")
anonymous, signed_in = APIClient(), APIClient()
signed_in.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=root).key)
admit = "/api/queues/default/admit/"
calls = {
    "anonymous-queues": anonymous.get("/api/queues/"),
    "anonymous-admit": anonymous.post(admit, {"request_id": "a", "payload": "p"}, format="json"),
    "anonymous-schema": anonymous.get("/api/schema/"),
    "anonymous-docs": anonymous.get("/api/docs/"),
    "admit": signed_in.post(admit, {"request_id": "r1", "payload": "p"}, format="json"),
    "admit-form": signed_in.post(admit, {"request_id": "r2", "payload": "p"}),
    "admit-nan": signed_in.generic(
        "POST", admit, b'{"request_id": "r3", "payload": "p", "delay": NaN}',
        content_type="application/json",
    ),
    "admit-deep": signed_in.generic(
        "POST", admit, b"[" * 1000 + b"]" * 1000, content_type="application/json"
    ),
    "schema": signed_in.get("/api/schema/", {"format": "json"}),
    "docs": signed_in.get("/api/docs/"),
    "token": anonymous.post("/api/token/", {"username": "root", "password": "pw"}, format="json"),
    "token-wrong": anonymous.post("/api/token/", {"username": "root", "password": "no"}, format="json"),
}
print(json.dumps({
    name: {
        "status": response.status_code,
        "type": response.get("Content-Type"),
        "www": response.get("WWW-Authenticate"),
        "body": response.content.decode("utf-8", "replace"),
    }
    for name, response in calls.items()
}))
"""


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The answers of a process whose REST_FRAMEWORK is HOSTILE from the start."""
    import uuid

    from tests.support.redis_server import delete_namespace

    folder = tmp_path_factory.mktemp("hostile")
    namespace = f"t{uuid.uuid4().hex[:16]}"
    rest_framework = {key: value for key, value in HOSTILE.items() if key != "EXCEPTION_HANDLER"}
    (folder / "hostile_settings.py").write_text(
        SETTINGS.format(rest_framework=rest_framework, namespace=namespace)
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hostile_settings",
        "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)]),
    }
    try:
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(SCRIPT)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        delete_namespace(client, namespace)
        client.close()
    assert result.returncode == 0, result.stderr
    answers: dict[str, dict[str, Any]] = json.loads(result.stdout.strip().splitlines()[-1])
    return answers


@pytest.mark.parametrize(
    "call", ["anonymous-queues", "anonymous-admit", "anonymous-schema", "anonymous-docs"]
)
def test_anonymous_calls_are_401_in_the_apis_shape(
    hostile_run: dict[str, dict[str, Any]], call: str
) -> None:
    answer = hostile_run[call]
    assert answer["status"] == 401, answer
    assert answer["type"] == "application/json"
    assert answer["www"] == "Token"
    assert json.loads(answer["body"])["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize(
    ("call", "status", "code"),
    [
        ("admit", 201, None),
        ("admit-form", 415, "unsupported_media_type"),
        ("admit-nan", 400, "parse_error"),
        ("admit-deep", 400, "parse_error"),
        ("token-wrong", 400, "credentials_invalid"),
        ("token", 200, None),
    ],
)
def test_calls_keep_their_answers(
    hostile_run: dict[str, dict[str, Any]], call: str, status: int, code: str | None
) -> None:
    answer = hostile_run[call]
    assert answer["status"] == status, answer
    assert answer["type"] == "application/json"
    body = json.loads(answer["body"])
    if code is not None:
        assert body["error"]["code"] == code
    # Compact and UTF-8, as always.
    assert answer["body"] == json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def test_the_schema_and_the_docs_page_still_work(hostile_run: dict[str, dict[str, Any]]) -> None:
    schema = hostile_run["schema"]
    assert schema["status"] == 200, schema
    assert '"/api/queues/{queue}/admit/"' in schema["body"]
    docs = hostile_run["docs"]
    assert docs["status"] == 200, docs
    assert docs["type"].startswith("text/html")
    assert "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in docs["body"]
