"""Limits per task (KEY "task", KEY_LIMITS) through real worker processes.

The tasks record on the Redis server what ran at once per task (``overlap_by_key``,
the task path given as the tenant too), so nothing here asserts a wall-clock time.
"""

from __future__ import annotations

import json

import pytest
import redis

from django_ledger import Ledger
from django_ledger.core.limits import Limits
from tests.support.worker_process import wait_until
from tests.worker.test_limits_worker import workers  # noqa: F401 - the fixture

pytestmark = pytest.mark.standalone_only(
    reason="its worker processes connect to the standalone URL"
)
EXPORT, MAIL = "shop.tasks.export", "shop.tasks.mail"


def admit(ledger: Ledger, task: str, n: int) -> list[str]:
    ids = [f"{task}-{i:05d}" for i in range(n)]
    body = {"args": [], "kwargs": {"tenant_id": task}, "task": task}
    answers = ledger.admit_many((i, json.dumps(body)) for i in ids)
    assert all(a.status.name == "ADMITTED" for a in answers)
    return ids


def test_a_tasks_own_concurrency_holds_across_workers_while_the_others_proceed(
    redis_client: redis.Redis,
    namespace: str,
    workers: list,  # noqa: F811
) -> None:
    ledger = Ledger(redis_client, namespace, "bytask")
    redis_client.set(ledger.fences_key, 1000)  # counted from here: one fence a claim
    # As the workers' settings will, so a worker's write changes nothing.
    ledger.set_limits(Limits(concurrency=3, key="task"), source="settings", force=False)
    ledger.set_key_limits(EXPORT, Limits(concurrency=1), source="settings", force=False)
    ids = admit(ledger, EXPORT, 12) + admit(ledger, MAIL, 30)
    for _ in range(3):
        workers("bytask", "--concurrency", "6")  # type: ignore[operator]
    wait_until(lambda: ledger.stats().completed == 42, timeout=90, what="42 tasks done")
    most = {k.decode(): int(v) for k, v in redis_client.hgetall(f"{namespace}:kmost").items()}
    # The export never ran twice at once; the mails reached the queue's 3, never past it.
    assert most == {EXPORT: 1, MAIL: 3}
    assert all(r is not None and r.attempts == 1 for r in ledger.resolve_many(ids))
    assert int(redis_client.get(ledger.fences_key) or 0) - 1000 == 42  # one claim per record
