"""The HTTP runner (``POST ledger-runner/queues/<queue>/run/``): tasks run in the request.

Eight clients at once over a live server drain 2,000 tasks: each task runs once (the
handler counts its runs in Redis), and the answers' counts add up to what ran. The
endpoint is off unless mounted, needs the claim permission on a queue the caller
reaches, and refuses a budget that is not shorter than the lease.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.db import connections as db_connections
from rest_framework.test import APIClient

from django_ledger import Ledger
from tests.support.api_helpers import error_code, token_client

pytest_plugins = ["tests.support.api_fixtures"]

HANDLER = "tests.support.worker_handlers.record"
RUN = "/ledger-runner/queues/{queue}/run/"


@pytest.fixture
def raw_queue(settings: Any, api_namespace: str) -> str:
    """A raw queue whose handler counts each run in ``{namespace}:runs``."""
    settings.LEDGER = {
        **settings.LEDGER,
        "QUEUES": {
            **settings.LEDGER["QUEUES"],
            "raw": {"HANDLER": HANDLER, "LEASE": timedelta(seconds=10)},
            "walled": {"HANDLER": HANDLER, "GROUPS": ["ops"]},
            "slow": {
                "HANDLER": "tests.support.worker_handlers.wait_for_release",
                "LEASE": timedelta(seconds=2),
            },
        },
    }
    settings.ROOT_URLCONF = "tests.support.runner_urls"
    return "raw"


@pytest.mark.django_db(transaction=True)
def test_eight_clients_at_once_run_each_of_2000_tasks_once_and_their_counts_add_up(
    raw_queue: str,
    api_make_user: Any,
    redis_client: redis.Redis,
    api_namespace: str,
) -> None:
    ledger = Ledger(redis_client, api_namespace, raw_queue)
    ids = [f"task-{n}" for n in range(2000)]
    ledger.admit_many([(request_id, "x") for request_id in ids])
    user = api_make_user("claim")
    answers: list[dict[str, Any]] = []
    failures: list[BaseException] = []

    def client() -> None:
        # Eight callers at once, each its own client and database connection (a live
        # server on the in-memory test database would share one connection between them).
        caller = token_client(user)
        try:
            while True:
                response = caller.post(RUN.format(queue=raw_queue), {"limit": 100}, format="json")
                assert response.status_code == 200, response.content
                answer = response.json()
                answers.append(answer)
                if answer["counts"]["claimed"] == 0:
                    return
        except BaseException as exc:  # the test fails on it below
            failures.append(exc)
        finally:
            db_connections.close_all()

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures

    runs = {k.decode(): int(v) for k, v in redis_client.hgetall(f"{api_namespace}:runs").items()}
    assert sorted(runs) == sorted(ids) and set(runs.values()) == {1}  # each ran once
    ran = Counter(entry["id"] for answer in answers for entry in answer["ran"])
    assert sorted(ran) == sorted(ids) and set(ran.values()) == {1}
    totals = Counter()
    for answer in answers:
        totals.update(answer["counts"])
        assert answer["counts"]["claimed"] == len(answer["ran"]) <= 100
        assert all(entry["outcome"] == "completed" for entry in answer["ran"])
    assert totals["claimed"] == totals["completed"] == 2000
    assert totals["failed"] == totals["retried"] == totals["lost"] == totals["unfinished"] == 0
    assert ledger.stats().completed == 2000
    assert len({answer["worker_id"] for answer in answers}) == len(answers)


def test_a_run_answers_each_outcome_and_stops_at_its_limit(
    raw_queue: str, api_make_user: Any, api_namespace: str, redis_client: redis.Redis
) -> None:
    ledger = Ledger(redis_client, api_namespace, raw_queue)
    ledger.admit_many([(f"job-{n}", "x") for n in range(5)])
    client = token_client(api_make_user("claim"))
    first = client.post(RUN.format(queue=raw_queue), {"limit": 3, "budget": 5}, format="json")
    assert first.status_code == 200, first.content
    body = first.json()
    assert body["counts"] == {
        "claimed": 3,
        "completed": 3,
        "failed": 0,
        "retried": 0,
        "lost": 0,
        "unfinished": 0,
    }
    assert [entry["outcome"] for entry in body["ran"]] == ["completed"] * 3
    assert all(entry["attempt"] == 1 and entry["fence"] > 0 for entry in body["ran"])
    assert body["budget"] == 5 and body["worker_id"].startswith("http:")
    rest = client.post(RUN.format(queue=raw_queue), {}, format="json").json()
    assert rest["counts"]["claimed"] == 2 and rest["budget"] == 5.0  # half the 10 s lease
    assert ledger.stats().completed == 5


def test_the_runner_is_refused_without_its_permission_queue_or_a_budget_under_the_lease(
    raw_queue: str, api_make_user: Any, api_namespace: str, redis_client: redis.Redis
) -> None:
    Ledger(redis_client, api_namespace, raw_queue).admit("kept", "x")
    path = RUN.format(queue=raw_queue)
    assert APIClient().post(path, {}, format="json").status_code == 401
    viewer = token_client(api_make_user("view"))
    assert error_code(viewer.post(path, {}, format="json")) == "permission_denied"
    claimer = token_client(api_make_user("claim"))
    walled = claimer.post(RUN.format(queue="walled"), {}, format="json")
    assert walled.status_code == 404 and error_code(walled) == "queue_not_found"
    for budget in (10, 60, 0, -1):
        answer = claimer.post(path, {"budget": budget}, format="json")
        assert answer.status_code == 400, (budget, answer.content)
    for limit in (0, 1001, "many"):
        assert claimer.post(path, {"limit": limit}, format="json").status_code == 400
    # Nothing ran for any of them, and the API's own URLs do not serve the runner.
    assert not redis_client.exists(f"{api_namespace}:runs")
    assert claimer.post(f"/api/queues/{raw_queue}/run/", {}, format="json").status_code == 404


def test_a_run_claims_nothing_past_its_budget_and_returns_within_the_lease(
    raw_queue: str, api_make_user: Any, api_namespace: str, redis_client: redis.Redis
) -> None:
    ledger = Ledger(redis_client, api_namespace, "slow")
    ledger.admit_many([("stuck", "x"), ("next", "x")])
    client = token_client(api_make_user("claim"))
    try:
        answer = client.post(RUN.format(queue="slow"), {"budget": 0.5}, format="json")
        # The task ends only when released, below: the run answered without waiting for it.
        states = [record.state for record in ledger.resolve_many(["stuck", "next"]) if record]
    finally:
        redis_client.set(f"{api_namespace}:release", 1)  # the task left to its lease ends
    assert answer.status_code == 200, answer.content
    counts = answer.json()["counts"]
    assert counts["claimed"] == 1  # none claimed once the budget was spent
    assert counts["unfinished"] == 1 and answer.json()["ran"] == []  # left to its lease
    assert sorted(state.value for state in states) == ["CLAIMED", "PENDING"]
    assert ledger.stats().pending_due + ledger.stats().pending_later >= 1  # "next" still waits


def test_a_django_task_runs_through_the_runner_with_its_result_and_a_retry_backs_off(
    raw_queue: str, api_make_user: Any
) -> None:
    from tests.support.tasks_app import tasks

    added = tasks.add.enqueue(2, 3)
    failing = tasks.fail.enqueue("no")
    client = token_client(api_make_user("claim"))
    answer = client.post(RUN.format(queue="default"), {"limit": 10}, format="json").json()
    outcomes = {entry["id"]: entry["outcome"] for entry in answer["ran"]}
    assert outcomes[added.id] == "completed"
    assert outcomes[failing.id] in ("retry", "failed")  # by its max attempts
    result = tasks.add.get_result(added.id)
    assert result.status.name == "SUCCESSFUL" and result.return_value == 5
    assert result.worker_ids == [answer["worker_id"]]
