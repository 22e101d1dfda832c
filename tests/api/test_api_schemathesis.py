"""Property-based run of schemathesis against the live schema, through the WSGI app.

Every operation, with generated valid and invalid input: no 5xx, and every response
matches its documented status, content type, headers and schema; and no call without
credentials succeeds. Kept short (a few examples per operation) for CI.

schemathesis' own pytest integration (``schema.parametrize()``) does not run under
pytest 9, so the operations are parametrized here and each is driven by hypothesis.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

pytest_plugins = ["tests.support.api_fixtures"]

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
QUICK = settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def served_schema() -> dict[str, Any]:
    """The schema /api/schema/ serves, built as its view builds it (the view itself needs a
    signed-in user, and the database is not open while tests are collected)."""
    generator = SchemaGenerator()
    document = generator.get_schema(request=None, public=True)
    return cast(dict[str, Any], json.loads(OpenApiJsonRenderer().render(document)))


SCHEMA = schemathesis.openapi.from_dict(served_schema())
SCHEMA.app = get_wsgi_application()
SCHEMA.location = "/api/schema/"
OPERATIONS = {result.ok().label: result.ok() for result in SCHEMA.get_all_operations()}


def cases(label: str) -> st.SearchStrategy[Any]:
    """Valid and invalid calls of one operation, on a configured queue."""
    operation = OPERATIONS[label]
    # A generated queue name is (almost) never configured: pin it, so that calls
    # reach the view rather than stop at 404 queue_not_found.
    pinned = {"queue": "default"} if "{queue}" in operation.path else None
    return st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE, path_parameters=pinned),
        operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=pinned),
    )


@pytest.fixture(autouse=True)
def own_throttle_counts(request: pytest.FixtureRequest) -> None:
    """Each test counts its own calls (a cache of its own): the token throttle's default
    (10 a minute per address) would otherwise meet the calls of the tests before it."""
    django_settings = request.getfixturevalue("settings")  # pytest-django's, not hypothesis's
    django_settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"throttles-{request.node.nodeid}",
        }
    }


@pytest.fixture
def superuser_token(api_make_user: Callable[..., User]) -> str:
    token, _ = Token.objects.get_or_create(user=api_make_user(superuser=True))
    return str(token.key)


#: The one operation open to anyone: its credentials are in the body.
TOKEN = "POST /api/token/"


def test_the_schema_lists_every_operation() -> None:
    # With GET results/{request_id}, series/, limits/, workflows/; POST records/{id}/cancel/
    # and records/bulk/; the schedules' list, create, read, replace, delete, pause, resume.
    assert len(OPERATIONS) == 34
    assert TOKEN in OPERATIONS


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_every_operation_keeps_its_contract(label: str, superuser_token: str) -> None:
    headers = {"Authorization": f"Token {superuser_token}"}

    @QUICK
    @given(case=cases(label))
    def check(case: Any) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS)

    check()


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_no_call_without_credentials_succeeds(label: str, api_anonymous: Any) -> None:
    @settings(QUICK, max_examples=4)
    @given(case=cases(label))
    def check(case: Any) -> None:
        response = case.call()
        # Generated credentials name no user: the token endpoint refuses them.
        expected = 400 if label == TOKEN else 401
        assert response.status_code == expected, (label, response.text)

    check()
