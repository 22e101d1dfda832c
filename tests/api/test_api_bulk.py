"""``POST /api/queues/{q}/records/bulk/``: preview, run and step a bulk action over a filter.

Authentication and the action's own permission on the queue; a queue out of the caller's
groups answers 404; a bad filter 400 with one sentence and nothing written; a preview
counts; a run answers 202 while it goes on and 200 once it has ended; a run another call
holds answers 409; a record that moved on between a page's read and its act is skipped
and counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger import Ledger, State
from django_ledger.core import bulk
from django_ledger.core.results import SettlementStatus
from django_ledger.services import bulk as bulk_runs
from django_ledger.services.bulk_filter import parse_filter
from tests.support.api_helpers import error_code, post_json, url
from tests.support.bulk_helpers import import_ended

pytest_plugins = ["tests.support.api_fixtures"]

BULK = url("default", "records/bulk/")


def test_anonymous_is_401_and_each_action_needs_its_permission(
    api_anonymous: APIClient, api_client_for: Callable[..., APIClient], api_ledger: Ledger
) -> None:
    import_ended(api_ledger, 3, ended_at=api_ledger.server_time_ms() - 10_000)
    assert post_json(api_anonymous, BULK, {"action": "retry"}).status_code == 401
    viewer = api_client_for("view")
    response = post_json(viewer, BULK, {"action": "retry"})
    assert (response.status_code, error_code(response)) == (403, "permission_denied")
    assert "you may not retry records of queue 'default'" in response.json()["error"]["message"]
    purger = api_client_for("view", "purge")
    assert post_json(purger, BULK, {"action": "cancel"}).status_code == 403  # operate
    assert post_json(purger, BULK, {"action": "purge", "preview": True}).status_code == 200
    assert api_ledger.stats().dead == 3


def test_a_queue_out_of_the_callers_groups_is_404(
    api_client_for: Callable[..., APIClient], api_ledger: Ledger, settings: Any
) -> None:
    queues = {**settings.LEDGER["QUEUES"], "default": {"GROUPS": ["ops"]}}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues}
    response = post_json(api_client_for("view", "retry"), BULK, {"action": "retry"})
    assert (response.status_code, error_code(response)) == (404, "queue_not_found")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "name the action"),
        ({"action": "retry", "state": ["PENDING"]}, "retry applies to DEAD/FAILED/COMPLETED"),
        ({"action": "retry", "task": "no.such.task"}, "no task 'no.such.task' is declared"),
        ({"action": "retry", "ended_after": "soon"}, "is not a time"),
        ({"action": "cancel", "ended_after": "1"}, "a updated_at range selects"),
        (
            {"action": "retry", "ended_after": "2026-02-01", "ended_before": "2026-01-01"},
            "the updated_at range ends before it starts",
        ),
        ({"action": "retry", "run": "0" * 32}, "no bulk run"),
    ],
)
def test_a_bad_filter_is_400_and_writes_nothing(
    api_root: APIClient, api_ledger: Ledger, body: dict[str, Any], message: str
) -> None:
    import_ended(api_ledger, 3, ended_at=api_ledger.server_time_ms() - 10_000)
    response = post_json(api_root, BULK, body)
    assert (response.status_code, error_code(response)) == (400, "invalid_filter"), response.json()
    assert message in response.json()["error"]["message"]
    assert api_ledger.stats().dead == 3
    assert post_json(api_root, BULK, {"action": "explode"}).status_code == 400


def test_a_preview_counts_and_a_run_steps_to_its_end(
    api_root: APIClient, api_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = api_ledger.server_time_ms()
    import_ended(api_ledger, 1200, ended_at=now - 10_000, ties=1)  # pages of 500
    import_ended(api_ledger, 5, state=State.COMPLETED, ended_at=now - 10_000, prefix="k")
    body = {"action": "retry", "state": ["DEAD"], "ended_after": str(now - 10_000 + 10)}
    preview = post_json(api_root, BULK, {**body, "preview": True})
    assert preview.status_code == 200
    assert preview.json()["count"] == 1190
    assert preview.json()["filter"]["bounds"] == {"updated_at": [now - 9_990, None]}
    # Each call runs for its time: none here, so each call runs one page and answers 202.
    monkeypatch.setattr("django_ledger.api.views.bulk.STEP_SECONDS", 0.0)
    first = post_json(api_root, BULK, body)
    assert first.status_code == 202, first.json()
    run_id = first.json()["id"]
    assert first.json()["state"] == "running" and first.json()["matched"] == 1190
    assert first.json()["done"] == 500
    for _ in range(10):
        step = post_json(api_root, BULK, {"run": run_id})
        if step.status_code == 200:
            break
        assert step.status_code == 202
    assert step.json()["state"] == "finished"
    assert (step.json()["done"], step.json()["skipped"]) == (1190, 0)
    assert api_ledger.stats().dead == 10 and api_ledger.stats().completed == 5


def test_a_run_another_call_holds_is_409(api_root: APIClient, api_ledger: Ledger) -> None:
    import_ended(api_ledger, 3, ended_at=api_ledger.server_time_ms() - 10_000)
    spec = parse_filter("default", "retry", may=lambda *_: True)
    run = bulk_runs.start_run(spec, by="ops")
    head = api_ledger.redis
    head.hset(bulk.run_key(api_ledger, run.id), "hold", api_ledger.server_time_ms() + 60_000)
    response = post_json(api_root, BULK, {"run": run.id})
    assert (response.status_code, error_code(response)) == (409, "run_busy")
    assert api_ledger.stats().dead == 3


def test_a_record_that_moved_on_is_skipped_and_counted(
    api_root: APIClient, api_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(4):
        api_ledger.admit(f"p{i}", "{}")
    real_act = bulk.act_page

    def worker_claims_first(*args: Any) -> tuple[int, int]:
        # Between the page's read and its act, a worker claims one of the records.
        assert api_ledger.claim("worker-1", 30) is not None
        return real_act(*args)

    monkeypatch.setattr(bulk, "act_page", worker_claims_first)
    response = post_json(api_root, BULK, {"action": "fail"})
    assert response.status_code == 200, response.json()
    assert (response.json()["done"], response.json()["skipped"]) == (3, 1)
    stats = api_ledger.stats()
    assert (stats.failed, stats.claimed) == (3, 1)


def test_a_bulk_cancel_takes_the_cancel_path_for_queued_and_running_records(
    api_client_for: Callable[..., APIClient], api_ledger: Ledger
) -> None:
    for i in range(3):
        api_ledger.admit(f"c{i}", "{}")
    claim = api_ledger.claim("worker-1", 30)
    assert claim is not None
    assert post_json(api_client_for("view", "retry"), BULK, {"action": "cancel"}).status_code == 403
    response = post_json(
        api_client_for("view", "operate"), BULK, {"action": "cancel", "reason": "bad batch"}
    )
    assert response.status_code == 200, response.json()
    assert (response.json()["done"], response.json()["skipped"]) == (3, 0)
    assert response.json()["filter"]["states"] == ["PENDING", "CLAIMED"]
    # The running one's settlement is refused (the cancel's fence), as a single cancel does.
    assert api_ledger.settle(claim, State.COMPLETED).status is SettlementStatus.LOST
    assert api_ledger.stats().failed == 3
    doc = api_ledger.results(["c1"])[0] or b""
    assert b"cancelled by user" in doc and b"bad batch" in doc
