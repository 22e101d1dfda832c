"""Stored schedules in one process: edits decide what the old timing owed; deletes mid-fire.

A scheduler ticks in the test's process (``services.scheduler.Scheduler``) on the
suite's redis-server; the clock is the server's, moved back with ``set_through``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

import tests.support.tasks_app.tasks  # noqa: F401 - the project imported its tasks
from django_ledger.conf import get_ledger
from django_ledger.core.schedule import Fire, Pending, definitions_key, state_key
from django_ledger.services import runtime_schedules as runtime
from django_ledger.services import scheduler

TASK = "tests.support.tasks_app.tasks.noop"
EVERY_SECOND = {"TASK": TASK, "EVERY": 1, "MISFIRE": "all", "GRACE": 120}


@pytest.fixture
def stored_namespace(settings: Any, namespace: str, redis_client: redis.Redis) -> Iterator[str]:
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace, "SCHEDULES": {}}
    yield namespace
    redis_client.delete(state_key(namespace), definitions_key(namespace))


def records(key: str) -> list[int]:
    ledger = get_ledger("default")
    ids = [k.decode() for k in ledger.redis.hkeys(ledger.records_key)]
    return sorted(int(i.rsplit(":", 1)[1]) for i in ids if i.startswith(f"schedule:{key}:"))


def test_an_edit_decides_the_fires_the_old_timing_owes_and_none_of_the_new(
    stored_namespace: str,
) -> None:
    runtime.create("beat", EVERY_SECOND, "test")
    store = scheduler.store()
    now = store.server_time_ms() // 1000
    store.set_through("beat", now - 5)  # no scheduler ran for five seconds
    runtime.edit("beat", {**EVERY_SECOND, "EVERY": 3600}, "test")

    snapshot = store.snapshot()
    owed = sorted(snapshot.pending["beat"])
    assert owed[0] == now - 4 and owed == list(range(owed[0], owed[-1] + 1)) and owed[-1] >= now
    assert {entry.node for entry in snapshot.pending["beat"].values()} == {runtime.EDITOR_NODE}
    assert snapshot.through["beat"] == owed[-1]
    report = scheduler.Scheduler("node-a").tick()  # takes the editor's fires over
    assert sorted(e.fire.epoch for e in report.events) == owed
    assert records("beat") == owed
    assert store.snapshot().pending.get("beat") is None
    scheduler.Scheduler("node-b").tick()
    assert records("beat") == owed  # nothing more: the next hourly fire is to come


def test_a_node_that_read_the_schedules_before_an_edit_cannot_commit_after_it(
    stored_namespace: str,
) -> None:
    runtime.create("beat", EVERY_SECOND, "test")
    store = scheduler.store()
    before = store.snapshot()
    runtime.edit("beat", {**EVERY_SECOND, "EVERY": 2}, "test")
    through = store.snapshot().through["beat"]
    pending = Pending("node-a", 0)
    assert not store.commit("beat", through, through + 1, [through + 1], pending, before.stamp)
    assert store.commit("beat", through, through + 1, [], pending, store.snapshot().stamp)


def test_a_schedule_deleted_while_it_fires_is_admitted_once_and_then_never(
    stored_namespace: str,
) -> None:
    runtime.create("beat", EVERY_SECOND, "test")
    store = scheduler.store()
    node = scheduler.Scheduler("node-a")
    node.tick()  # loads it
    store.set_through("beat", store.server_time_ms() // 1000 - 1)
    deleted: list[Fire] = []

    def delete_once(fire: Fire) -> None:  # between the dispatch claim and the admission
        if not deleted:
            deleted.append(fire)
            runtime.delete("beat", "test")

    node.ticker.after_claim = delete_once
    node.tick()
    assert deleted and records("beat") == [deleted[0].epoch]
    node.ticker.after_claim = None
    store.set_through("beat", store.server_time_ms() // 1000 - 3)  # a stale node's write
    node.tick()
    scheduler.Scheduler("node-b").tick()
    assert records("beat") == [deleted[0].epoch]
    assert runtime.stored().definitions == {}
    runtime.create("beat", EVERY_SECOND, "test")  # a new one of that name starts afresh
    assert store.snapshot().through["beat"] >= store.server_time_ms() // 1000 - 1
