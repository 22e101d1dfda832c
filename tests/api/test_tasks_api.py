"""The REST API's task results: ``GET /api/queues/<queue>/results/<id>``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger import get_ledger
from django_ledger.core.jobs import encode_task
from tests.support.api_helpers import error_code, url
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_until_settled

pytest_plugins = ["tests.support.api_fixtures", "tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db


def test_a_result_reads_as_django_shows_it(api_root: APIClient) -> None:
    result = tasks.flaky.enqueue(1)
    run_until_settled()
    response = api_root.get(url("default", f"results/{result.id}"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["request_id"] == result.id and body["queue"] == "default"
    assert body["task"] == "tests.support.tasks_app.tasks.flaky"
    assert (body["status"], body["record_state"]) == ("SUCCESSFUL", "COMPLETED")
    assert (body["args"], body["kwargs"], body["options"]) == ([1], {}, {})
    assert body["attempts"] == 2 and len(body["worker_ids"]) == 2
    assert [e["exception_class_path"] for e in body["errors"]] == ["builtins.ConnectionError"]
    assert body["has_return_value"] and body["return_value"] == 2
    assert body["enqueued_at"] <= body["started_at"] <= body["finished_at"]


def test_a_task_enqueued_through_the_api_reads_back(api_root: APIClient) -> None:
    payload = encode_task("tests.support.tasks_app.tasks.add", [2, 3], {}, {"max_attempts": 1})
    admitted = api_root.post(
        url("default", "admit/"), {"request_id": "from-go-1", "payload": payload}, format="json"
    )
    assert admitted.status_code in (200, 201), admitted.content
    body = api_root.get(url("default", "results/from-go-1")).json()
    assert (body["status"], body["has_return_value"], body["options"]) == (
        "READY",
        False,
        {"max_attempts": 1},
    )
    run_until_settled()
    assert api_root.get(url("default", "results/from-go-1")).json()["return_value"] == 5
    assert tasks.add.get_result("from-go-1").return_value == 5


def test_unknown_ids_and_raw_payloads_are_404(api_root: APIClient) -> None:
    missing = api_root.get(url("default", "results/nope"))
    assert (missing.status_code, error_code(missing)) == (404, "record_not_found")
    get_ledger("default").admit("raw-1", "plain text")
    raw = api_root.get(url("default", "results/raw-1"))
    assert (raw.status_code, error_code(raw)) == (404, "not_a_task")


def test_reading_a_result_takes_the_permission_to_read_records(
    api_client_for: Callable[..., APIClient], api_namespace: str, task_namespace: str
) -> None:
    result = tasks.add.enqueue(1, 2)
    path = url("default", f"results/{result.id}")
    assert api_client_for().get(path).status_code == 403
    reader: Any = api_client_for("view")
    assert reader.get(path).status_code == 200


def test_a_trailing_slash_is_not_part_of_the_id(api_root: APIClient) -> None:
    result = tasks.add.enqueue(1, 2)
    with_slash = api_root.get(url("default", f"results/{result.id}/"))
    assert with_slash.status_code == 200, with_slash.content
    assert with_slash.json()["request_id"] == result.id
    assert api_root.get(url("default", f"results/{result.id}")).json() == with_slash.json()
    # An id that ends in a slash is read with one more after it.
    payload = encode_task("tests.support.tasks_app.tasks.add", [1, 1], {}, {})
    get_ledger("default").admit("ends-in/", payload)
    assert api_root.get(url("default", "results/ends-in%2F/")).json()["request_id"] == "ends-in/"
    missing = api_root.get(url("default", "results/ends-in/"))
    assert (missing.status_code, error_code(missing)) == (404, "record_not_found")
