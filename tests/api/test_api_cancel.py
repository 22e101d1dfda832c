"""``POST /api/queues/{q}/records/{id}/cancel/``: cancel a record, the operate permission."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from django_ledger import Ledger, State
from django_ledger.core.results import SettlementStatus
from django_ledger.operations import snapshot
from tests.support.api_helpers import error_code, post_json, url

pytest_plugins = ["tests.support.api_fixtures"]


def cancel_url(request_id: str) -> str:
    return url("default", f"records/{request_id}/cancel/")


def test_a_queued_and_a_running_record_are_cancelled(
    api_client_for: Callable[..., APIClient], api_ledger: Ledger
) -> None:
    client = api_client_for("operate")
    api_ledger.admit("running", "{}")
    api_ledger.admit("queued", "{}", delay=60)
    claim = api_ledger.claim("w-1", lease=30)
    assert claim is not None
    response = post_json(client, cancel_url("queued"), {"reason": "not wanted"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled" and response.json()["was"] == "PENDING"
    response = post_json(client, cancel_url("running"), {})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["was"], body["effects_committed"]) == ("CLAIMED", False)
    assert body["fence"] > claim.fence
    assert api_ledger.settle(claim, State.COMPLETED).status is SettlementStatus.LOST
    doc = api_ledger.results(["queued"])[0] or b""
    assert b"cancelled by user1 at " in doc and b"not wanted" in doc


def test_ended_missing_changed_and_bad_input_answer_as_the_api_does(
    api_client_for: Callable[..., APIClient], api_ledger: Ledger
) -> None:
    client = api_client_for("operate")
    api_ledger.admit("x", "{}")
    shown = snapshot(api_ledger, "x")
    assert shown is not None
    api_ledger.claim("w-1", lease=30)  # the record changes after it was shown
    response = post_json(client, cancel_url("x"), {"version": shown.version})
    assert (response.status_code, error_code(response)) == (409, "record_changed")
    assert api_ledger.resolve("x").state is State.CLAIMED  # type: ignore[union-attr]
    current = snapshot(api_ledger, "x")
    assert current is not None
    assert post_json(client, cancel_url("x"), {"version": current.version}).status_code == 200
    response = post_json(client, cancel_url("x"), {})  # twice: it has ended
    assert (response.status_code, error_code(response)) == (409, "record_ended")
    assert response.json()["error"]["details"]["state"] == "FAILED"
    response = post_json(client, cancel_url("nope"), {})
    assert (response.status_code, error_code(response)) == (404, "record_not_found")
    response = post_json(client, cancel_url("x"), {"reason": "é" * 251})
    assert (response.status_code, error_code(response)) == (400, "invalid")
    response = post_json(client, cancel_url("x"), {"reason": 3.5, "version": ["a"]})
    assert (response.status_code, error_code(response)) == (400, "invalid")


def test_a_user_without_operate_is_refused_and_nothing_changes(
    api_client_for: Callable[..., APIClient], api_anonymous: APIClient, api_ledger: Ledger
) -> None:
    api_ledger.admit("kept", "{}")
    for client in (api_client_for("view"), api_client_for("admit"), api_anonymous):
        response: Any = post_json(client, cancel_url("kept"), {})
        assert response.status_code in (401, 403), response.content
    record = api_ledger.resolve("kept")
    assert record is not None and record.state is State.PENDING
