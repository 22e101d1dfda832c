"""Limits per key and fair share through real worker processes (threads in each).

The tasks record on the Redis server what ran at once per tenant and the order in which
they started, so nothing here asserts a wall-clock time.
"""

from __future__ import annotations

import json
import os

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.core.limits import Limits
from tests.support.worker_process import wait_until
from tests.worker.test_limits_worker import workers  # noqa: F401 - the fixture

pytestmark = pytest.mark.standalone_only(
    reason="its worker processes connect to the standalone URL"
)
KEY = "kwargs.tenant_id"


def keyed_queue(client: redis.Redis, namespace: str, name: str, limits: Limits) -> Ledger:
    ledger = Ledger(client, namespace, name)
    # As the workers' settings will: the same limits, so a worker's write changes nothing.
    ledger.set_limits(limits, source="settings", force=False)
    return ledger


def admit(ledger: Ledger, tenant: str, n: int, **extra: object) -> list[str]:
    ids = [f"{tenant}-{i:05d}" for i in range(n)]
    body = {"args": [], "kwargs": {"tenant_id": tenant, **extra}}
    answers = ledger.admit_many((i, json.dumps(body)) for i in ids)
    assert all(a.status.name == "ADMITTED" for a in answers)
    return ids


def test_a_concurrency_per_key_holds_for_each_key_and_spends_no_attempt(
    redis_client: redis.Redis,
    namespace: str,
    workers: list,  # noqa: F811
) -> None:
    ledger = keyed_queue(redis_client, namespace, "tenants", Limits(concurrency=2, key=KEY))
    redis_client.set(ledger.fences_key, 1000)  # counted from here: one fence a claim
    ids = admit(ledger, "a", 20) + admit(ledger, "b", 20) + admit(ledger, "c", 20)
    for _ in range(3):
        workers("tenants", "--concurrency", "6")  # type: ignore[operator]
    wait_until(lambda: ledger.stats().completed == 60, timeout=90, what="60 tasks done")
    most = {k.decode(): int(v) for k, v in redis_client.hgetall(f"{namespace}:kmost").items()}
    assert most == {"a": 2, "b": 2, "c": 2}  # each key reached its limit, none passed it
    assert all(r is not None and r.attempts == 1 for r in ledger.resolve_many(ids))
    # One claim per record: a task held by its key's limit was never claimed meanwhile.
    assert int(redis_client.get(ledger.fences_key) or 0) - 1000 == 60


def test_a_key_with_few_tasks_is_not_delayed_by_one_with_many(
    redis_client: redis.Redis,
    namespace: str,
    workers: list,  # noqa: F811
) -> None:
    ledger = keyed_queue(redis_client, namespace, "fair", Limits(key=KEY))
    admit(ledger, "big", 10_000)
    admit(ledger, "small", 10)  # admitted after all of the big key's
    for _ in range(2):
        workers("fair", "--concurrency", "4")  # type: ignore[operator]
    order = f"{namespace}:order"
    wait_until(lambda: redis_client.llen(order) >= 200, timeout=90, what="200 starts")
    starts = [t.decode() for t in redis_client.lrange(order, 0, -1)]
    tenth_small = [i for i, t in enumerate(starts) if t == "small"][9]
    hundredth_big = [i for i, t in enumerate(starts) if t == "big"][99]
    assert tenth_small < hundredth_big, starts[:120]


def test_a_killed_workers_slots_come_back_after_its_lease(
    redis_client: redis.Redis,
    namespace: str,
    workers: list,  # noqa: F811
) -> None:
    ledger = keyed_queue(redis_client, namespace, "stuck", Limits(concurrency=1, key=KEY))
    first = admit(ledger, "a", 1, hang=True)[0]
    rest = [f"a-more-{i}" for i in range(3)]
    body = json.dumps({"args": [], "kwargs": {"tenant_id": "a"}})
    ledger.admit_many((i, body) for i in rest)
    workers("stuck", "--concurrency", "2")  # type: ignore[operator]
    hung = f"{namespace}:hung"
    wait_until(lambda: redis_client.get(hung), timeout=60, what="the first task hung")
    # Its worker dies holding key a's one slot: nothing else of key a can start.
    process = workers.started[-1]  # type: ignore[attr-defined]
    os.kill(process.pid, 9)
    process.wait(10)
    assert redis_client.llen(f"{namespace}:done") == 0
    workers("stuck", "--concurrency", "2")  # type: ignore[operator]
    # After the 2 s lease, repair takes the hung claim back, and the slot is free.
    wait_until(lambda: ledger.stats().completed == 4, timeout=60, what="4 tasks done")
    records = {r.request_id: r for r in ledger.resolve_many([first, *rest]) if r}
    assert records[first].attempts == 2 and records[first].state is State.COMPLETED
    assert all(records[i].attempts == 1 for i in rest)
