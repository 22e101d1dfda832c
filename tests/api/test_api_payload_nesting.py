"""REST bad input: a task payload nested too deep, records no reader can decode, cursors.

The body's nesting is bounded by the parser; a payload is a string, so its own nesting
is checked at admission on a queue that carries tasks. A record admitted before the
bound (or on another path) answers a JSON error, never an HTML 500.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger import Ledger, get_ledger
from django_ledger.core.jobs import MAX_PAYLOAD_DEPTH, MAX_READ_DEPTH, encode_task
from tests.support.api_helpers import error_code, post_json, url

pytest_plugins = ["tests.support.api_fixtures"]
pytestmark = pytest.mark.django_db

ECHO = "tests.support.tasks_app.tasks.echo"


def payload_nested(levels: int) -> str:
    """A task document whose nesting is ``levels`` in all (its object and args count 2)."""
    inner = "[" * (levels - 2) + "]" * (levels - 2)
    return '{"args":[' + inner + f'],"kwargs":{{}},"task":"{ECHO}","v":1}}'


@pytest.mark.parametrize("levels", [MAX_PAYLOAD_DEPTH + 1, 5_000])
def test_a_task_payload_nested_too_deep_is_refused_400(
    api_root: APIClient, api_ledger: Ledger, levels: int
) -> None:
    body = {"request_id": "deep-1", "payload": payload_nested(levels)}
    response = post_json(api_root, url("default", "admit/"), body)
    assert response.status_code == 400, response.content
    assert error_code(response) == "payload_too_deep"
    assert str(MAX_PAYLOAD_DEPTH) in response.json()["error"]["message"]
    assert api_ledger.resolve("deep-1") is None


def test_the_deepest_task_payload_is_admitted(api_root: APIClient) -> None:
    body = {"request_id": "deepest", "payload": payload_nested(MAX_PAYLOAD_DEPTH)}
    assert post_json(api_root, url("default", "admit/"), body).status_code == 201
    result = api_root.get(url("default", "results/deepest"))
    assert result.status_code == 200 and result.json()["task"] == ECHO


def test_a_batch_refuses_each_deep_item_and_admits_the_others(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    items = [
        {"request_id": "ok-1", "payload": encode_task(ECHO, [1], {})},
        {"request_id": "deep-1", "payload": payload_nested(5_000)},
        {"request_id": "ok-2", "payload": encode_task(ECHO, [2], {})},
    ]
    response = post_json(api_root, url("default", "admit/batch/"), {"items": items})
    assert response.status_code == 200, response.content
    answers = [(r["request_id"], r["status"], r["reason"]) for r in response.json()["results"]]
    assert answers == [
        ("ok-1", "ADMITTED", None),
        ("deep-1", "REJECTED", "payload_too_deep"),
        ("ok-2", "ADMITTED", None),
    ]
    assert api_ledger.resolve("deep-1") is None


def test_a_raw_queue_takes_any_payload(settings: Any, api_root: APIClient) -> None:
    queues = {
        **settings.LEDGER["QUEUES"],
        "raw": {"HANDLER": "tests.support.worker_handlers.record"},
    }
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues}
    body = {"request_id": "deep-raw", "payload": payload_nested(5_000)}
    assert post_json(api_root, url("raw", "admit/"), body).status_code == 201
    # Its result reads as what it is: a record whose payload is no task document.
    response = api_root.get(url("raw", "results/deep-raw"))
    assert (response.status_code, error_code(response)) == (404, "not_a_task")


# Readers take up to MAX_READ_DEPTH (a workflow step's inputs add levels to a payload).
@pytest.mark.parametrize("levels", [MAX_READ_DEPTH + 1, 900, 100_000])
def test_the_result_of_a_record_nested_too_deep_is_a_json_error(
    api_root: APIClient, api_ledger: Ledger, levels: int
) -> None:
    api_ledger.admit("deep-old", payload_nested(levels))  # admitted past the API's check
    response = api_root.get(url("default", "results/deep-old"))
    assert response["Content-Type"].startswith("application/json")
    assert (response.status_code, error_code(response)) == (404, "not_a_task")
    assert "deeper than" in response.json()["error"]["details"]["reason"]


def test_the_record_of_a_payload_nested_too_deep_reads(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    api_ledger.admit("deep-old", payload_nested(100_000))
    response = api_root.get(url("default", "records/deep-old"))
    assert response.status_code == 200, response.content
    assert response.json()["payload"] == payload_nested(100_000)


# -- repair cursors --------------------------------------------------------------------


@pytest.mark.parametrize("cursor", ["18446744073709551616", "99999999999999999999"])
def test_a_repair_cursor_past_64_bits_is_400(api_root: APIClient, cursor: str) -> None:
    response = post_json(api_root, url("default", "repair/"), {"cursor": cursor})
    assert (response.status_code, error_code(response)) == (400, "invalid"), response.content
    assert "cursor" in response.json()["error"]["details"]


def test_the_largest_repair_cursor_is_taken(api_root: APIClient) -> None:
    response = post_json(api_root, url("default", "repair/"), {"cursor": str(2**64 - 1)})
    assert response.status_code == 200, response.content


def test_a_sharded_queue_repairs_page_by_page(settings: Any, api_root: APIClient) -> None:
    queues = {**settings.LEDGER["QUEUES"], "wide": {"SHARDS": 3}}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues}
    get_ledger("wide").admit_many([(f"r{i}", "x" * 100) for i in range(300)])
    cursor, scanned = "0", 0
    for _ in range(200):
        response = post_json(api_root, url("wide", "repair/"), {"cursor": cursor, "count": 50})
        assert response.status_code == 200, response.content
        body = response.json()
        scanned += body["counts"]["scanned"]
        cursor = body["cursor"]
        if body["done"]:
            break
    assert body["done"] and scanned >= 300
    past = post_json(api_root, url("wide", "repair/"), {"cursor": "3.0"})
    assert (past.status_code, error_code(past)) == (400, "invalid")
