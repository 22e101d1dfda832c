"""``GET /api/queues/<q>/series/``: the counters over time, as JSON."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from django_ledger import Ledger
from django_ledger.core.counters import EDGES, Counters, Tally
from tests.support.api_helpers import error_code, url

pytest_plugins = ["tests.support.api_fixtures"]


def flush(ledger: Ledger, namespace: str) -> None:
    tally = Tally()
    for _ in range(7):
        tally.add("default", "app.tasks.send", "completed", run_s=0.2, wait_s=0.01)
    tally.add("default", "app.tasks.send", "retry", run_s=0.2)
    tally.add("default", "app.tasks.send", "failed", run_s=0.2, wait_s=0.01)
    Counters(ledger.redis, namespace).flush(tally, force=True, queues=["default"])


def test_the_series_of_a_queue(api_root: APIClient, api_ledger: Ledger, api_namespace: str) -> None:
    for n in range(3):  # two due, one later: the flush samples the depth too
        api_ledger.admit(f"r-{n}", "work", delay=0 if n else 3600)
    assert api_ledger.claim("w", lease=60) is not None
    flush(api_ledger, api_namespace)
    for window, count, seconds in (("hour", 60, 60), ("day", 24, 3600), ("week", 168, 3600)):
        answer = api_root.get(url("default", "series/"), {"window": window})
        assert answer.status_code == 200, answer.content
        body = answer.json()
        assert (body["window"], body["bucket_seconds"], len(body["buckets"])) == (
            window,
            seconds,
            count,
        )
        assert body["bucket_edges"] == list(EDGES)
        last = body["buckets"][-1]
        assert last["ledger_tasks"] == {
            "completed": 7,
            "failed": 1,
            "retry": 1,
            "lost": 0,
            "dead": 0,
        }
        assert 0.1 < last["ledger_task_seconds"]["p50"] <= 0.25
        # The depth, named as the worker's Prometheus gauges; null where nobody sampled.
        assert last["ledger_queue_depth"] == 2
        assert last["ledger_queue_records"] == {"pending_due": 1, "claimed": 1, "dead": 0}
        assert body["buckets"][0]["ledger_queue_records"] is None
        assert [t["task"] for t in body["tasks"]] == ["app.tasks.send"]
        assert body["tasks"][0]["failure_rate"] == 0.125


def test_the_series_needs_the_queue_view_permission_and_a_known_window(
    api_client_for: Callable[..., APIClient], api_root: APIClient, api_ledger: Ledger
) -> None:
    assert api_client_for("view").get(url("default", "series/")).status_code == 403
    assert api_client_for("view_queue").get(url("default", "series/")).status_code == 200
    answer = api_root.get(url("default", "series/"), {"window": "month"})
    assert answer.status_code == 400 and error_code(answer) == "invalid"
    assert api_root.get(url("nope", "series/")).status_code == 404


def test_the_schema_describes_the_series(api_root: APIClient, api_ledger: Ledger) -> None:
    schema = api_root.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/queues/{queue}/series/"]["get"]
    assert operation["operationId"] == "series"
    assert {p["name"] for p in operation["parameters"]} >= {"queue", "window"}
