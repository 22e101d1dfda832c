"""The API's JSON parser: a body's nesting is bounded on every endpoint that takes one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from django_ledger import Ledger
from django_ledger.api.parsers import MAX_DEPTH, LedgerJSONParser, nesting_depth
from django_ledger.api.urls import urlpatterns
from tests.support.api_helpers import error_code, post_raw, url

pytest_plugins = ["tests.support.api_fixtures"]

UNSAFE = {"post", "put", "patch"}


def methods_of(pattern: Any) -> set[str]:
    """The HTTP methods a URL pattern of the API routes to a handler."""
    callback = pattern.callback
    actions = getattr(callback, "actions", None)
    if actions is not None:
        return set(actions)
    return {method for method in ("get", "post", "put", "patch") if hasattr(callback.cls, method)}


BODY_ROUTES = sorted(
    (pattern.name, method) for pattern in urlpatterns for method in methods_of(pattern) & UNSAFE
)


def path_of(name: str) -> str:
    pattern = next(p for p in urlpatterns if p.name == name)
    converters = pattern.pattern.converters
    kwargs = {"queue": "default"} if "queue" in converters else {}
    if "request_id" in converters:
        kwargs["request_id"] = "r1"
    if "key" in converters:
        kwargs["key"] = "nightly"
    return reverse(f"django_ledger_api:{name}", kwargs=kwargs)


def nested(depth: int, inner: str = "0") -> str:
    """An array nested ``depth`` levels deep around ``inner``."""
    return "[" * depth + inner + "]" * depth


def test_every_endpoint_that_takes_a_body_is_covered() -> None:
    names = {name for name, _ in BODY_ROUTES}
    assert {"token", "admit", "admit-batch", "claim", "settle-batch", "dispatch-claim"} <= names
    # with limits-change, record-cancel, records-bulk, and a schedule's create, change,
    # pause and resume
    assert len(BODY_ROUTES) == 19


@pytest.mark.parametrize(("name", "method"), BODY_ROUTES)
def test_a_body_nested_a_thousand_levels_is_400_parse_error(
    api_root: APIClient, api_ledger: Ledger, name: str, method: str
) -> None:
    path = path_of(name)
    response = api_root.generic(
        method.upper(), path, nested(1_000).encode(), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert error_code(response) == "parse_error"
    assert str(MAX_DEPTH) in response.json()["error"]["message"]
    assert response["Content-Type"] == "application/json"
    assert api_ledger.stats().total == 0


@pytest.mark.parametrize(("name", "method"), BODY_ROUTES)
def test_one_level_past_the_limit_is_refused_and_the_limit_itself_is_parsed(
    api_root: APIClient, name: str, method: str
) -> None:
    path = path_of(name)

    def call(body: str) -> Any:
        return api_root.generic(
            method.upper(), path, body.encode(), content_type="application/json"
        )

    # An object whose one field holds the rest: the depth counts objects and arrays.
    too_deep = call('{"items": ' + nested(MAX_DEPTH) + "}")
    assert too_deep.status_code == 400
    assert error_code(too_deep) == "parse_error"
    deepest = call('{"items": ' + nested(MAX_DEPTH - 1) + "}")
    # Parsed: then validated (most refuse the body's shape; repair takes its defaults; a
    # record's or a schedule's action looks it up, and there is none).
    assert deepest.status_code in (200, 400, 404), deepest.content
    if deepest.status_code == 404:
        assert error_code(deepest) in ("record_not_found", "schedule_not_found")
    if deepest.status_code == 400:  # a bulk run's filter is refused as a filter
        assert error_code(deepest) in ("invalid", "invalid_filter")


def test_brackets_inside_strings_do_not_count(api_root: APIClient, api_ledger: Ledger) -> None:
    payload = '[{"\\"' * 5_000 + "]}" * 5_000
    body = json.dumps({"request_id": "r1", "payload": payload})
    response = post_raw(api_root, url("default", "admit/"), body)
    assert response.status_code == 201, response.content
    record = api_ledger.resolve("r1")
    assert record is not None and record.payload == payload


def test_an_anonymous_deep_body_is_refused_before_it_is_parsed(api_anonymous: APIClient) -> None:
    response = post_raw(api_anonymous, url("default", "admit/"), nested(100_000))
    assert response.status_code == 401
    assert error_code(response) == "not_authenticated"


def test_nan_and_infinity_are_not_json(api_root: APIClient) -> None:
    for constant in ("NaN", "Infinity", "-Infinity"):
        body = '{"request_id": "r1", "payload": "p", "delay": ' + constant + "}"
        response = post_raw(api_root, url("default", "admit/"), body)
        assert response.status_code == 400
        assert error_code(response) == "parse_error"


def test_a_body_that_is_not_utf8_is_a_parse_error(api_root: APIClient) -> None:
    response = api_root.generic(
        "POST", url("default", "admit/"), b'{"payload": "\xff"}', content_type="application/json"
    )
    assert response.status_code == 400
    assert error_code(response) == "parse_error"


def test_a_compressing_charset_is_refused(api_root: APIClient) -> None:
    response = api_root.generic(
        "POST",
        url("default", "admit/"),
        b"{}",
        content_type="application/json; charset=bz2_codec",
    )
    assert response.status_code == 400
    assert error_code(response) == "parse_error"


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("0", 0),
        ('"[[["', 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["\\"[[[", [1]]', 2),
        ('["\\\\", [[1]]]', 3),  # an escaped backslash ends before the quote
        ('[["]]]]"]]', 2),
        (nested(MAX_DEPTH), MAX_DEPTH),
    ],
)
def test_nesting_depth(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth
    if depth:
        assert depth == _reference_depth(json.loads(text))


def test_nesting_depth_stops_counting_past_the_limit() -> None:
    assert nesting_depth(nested(10_000), limit=64) == 65
    assert nesting_depth(nested(1_000_000)) == MAX_DEPTH + 1


def test_the_count_is_right_on_the_largest_bodies() -> None:
    # A 2 MiB admission batch, and a 12 MiB body of empty arrays (the worst shape). How
    # fast is for benchmarks to say; a test asserts no wall-clock time.
    batch = json.dumps(
        {"items": [{"request_id": f"r{i}", "payload": "x" * 16_000} for i in range(128)]}
    )
    flat = "[" + ",".join(["[]"] * 4_000_000) + "]"
    assert nesting_depth(batch) == 3
    assert nesting_depth(flat) == 2


def test_the_parser_answers_a_body_at_the_limit() -> None:
    import io

    parser = LedgerJSONParser()
    assert parser.parse(io.BytesIO(nested(MAX_DEPTH).encode())) == _nested_list(MAX_DEPTH)


def _nested_list(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def _reference_depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_reference_depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_reference_depth(item) for item in value.values()), default=0)
    return 0


def test_too_many_query_parameters_or_form_fields_answer_the_json_error(
    api_root: APIClient, api_anonymous: APIClient, settings: Any
) -> None:
    many = "&".join(f"f{i}=x" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    for response in (
        api_root.get(url("default", "records/") + "?" + many),
        api_root.get("/api/queues/?" + many),
        api_root.generic(
            "POST",
            url("default", "admit/") + "?" + many,
            '{"request_id": "r", "payload": "p"}',
            content_type="application/json",
        ),
        api_anonymous.generic(
            "POST", "/api/token/", many, content_type="application/x-www-form-urlencoded"
        ),
    ):
        assert response.status_code == 400, response.content[:200]
        assert response["Content-Type"] == "application/json"
        assert error_code(response) == "too_many_fields"
