"""Enqueue once: an explicit id or a unique task is admitted once, and enqueue_many's batches.

Against the suite's Redis, through ``LedgerBackend`` as Django's task API reaches it.
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest
from django.test import override_settings

from django_ledger import get_ledger
from django_ledger.tasks import (
    TaskIdConflict,
    aenqueue_once,
    enqueue_many,
    enqueue_once,
)
from django_ledger.tasks.compat import (
    InvalidTask,
    task,
)
from tests.tasks_app import tasks
from tests.tasks_helpers import Enqueued

pytest_plugins = ["tests.tasks_fixtures"]


def total(queue: str = "default") -> int:
    return get_ledger(queue).stats().total


# -- idempotent enqueue -------------------------------------------------------------------


def test_an_explicit_id_is_admitted_once(task_namespace: str) -> None:
    first = enqueue_once(tasks.add, "order-1042:receipt", 1, 2)
    again = enqueue_once(tasks.add, "order-1042:receipt", 1, 2)
    assert again == first
    assert total() == 1
    with pytest.raises(TaskIdConflict, match="'order-1042:receipt'"):
        enqueue_once(tasks.add, "order-1042:receipt", 1, 3)
    with pytest.raises(TaskIdConflict, match="'order-1042:receipt'"):
        enqueue_once(tasks.echo, "order-1042:receipt", 1, 2)
    assert total() == 1


def test_a_unique_task_is_admitted_once_per_arguments(task_namespace: str) -> None:
    first = tasks.unique_add.enqueue(a=1, b=2)
    assert tasks.unique_add.enqueue(b=2, a=1).id == first.id  # keyword order does not count
    other = tasks.unique_add.enqueue(a=2, b=1)
    assert other.id != first.id
    assert first.id.startswith("unique:")
    assert total() == 2


def test_a_unique_queue_makes_every_task_unique(namespace: str) -> None:
    from tests.tasks_helpers import task_settings

    with task_settings(namespace, default={"UNIQUE": True}):
        assert tasks.add.enqueue(1, 2).id == tasks.add.enqueue(1, 2).id
        assert tasks.add.using(unique=False).enqueue(1, 2).id != tasks.add.enqueue(1, 2).id
        assert total() == 2


@pytest.mark.parametrize("kind", ["explicit", "unique"])
def test_eight_threads_at_once_make_one_admission(task_namespace: str, kind: str) -> None:
    start = threading.Barrier(8)
    results: list[Any] = []
    lock = threading.Lock()

    def enqueue() -> None:
        start.wait()
        if kind == "explicit":
            result = enqueue_once(tasks.add, "the-one", 1, 2)
        else:
            result = tasks.unique_add.enqueue(1, 2)
        with lock:
            results.append(result)

    with Enqueued() as seen:
        threads = [threading.Thread(target=enqueue) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(results) == 8
    assert len({result.id for result in results}) == 1
    assert len(seen.events) == 1
    assert total() == 1


def test_aenqueue_once_is_idempotent_too(task_namespace: str) -> None:
    async def twice() -> tuple[Any, Any]:
        first = await aenqueue_once(tasks.add, "async-1", 1, 2)
        return first, await aenqueue_once(tasks.add, "async-1", 1, 2)

    first, again = asyncio.run(twice())
    assert first == again and total() == 1


# -- bulk ------------------------------------------------------------------------------------


def evalsha_calls(client: Any) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


@pytest.mark.standalone_only(reason="its evalsha_calls reads INFO commandstats of one node")
def test_enqueue_many_admits_128_per_round_trip(task_namespace: str) -> None:
    client = get_ledger("default").redis
    before = evalsha_calls(client)
    with Enqueued() as seen:
        results = enqueue_many(tasks.add, [((i, i), {}) for i in range(300)])
    assert evalsha_calls(client) - before == 3  # 128 + 128 + 44
    assert [result.args for result in results] == [[i, i] for i in range(300)]
    assert len({result.id for result in results}) == 300
    assert len(seen.events) == 300
    assert total() == 300


def test_enqueue_many_checks_every_call_before_writing(task_namespace: str) -> None:
    calls: list[Any] = [((i,), {}) for i in range(10)]
    calls[7] = ((object(),), {})
    with pytest.raises(TypeError, match="Unsupported type"):
        enqueue_many(tasks.echo, calls)
    assert total() == 0


def test_enqueue_many_with_ids_answers_repeats(task_namespace: str) -> None:
    first = enqueue_many(tasks.add, [((1, 1), {}), ((2, 2), {})], ids=["a", "b"])
    again = enqueue_many(tasks.add, [((1, 1), {}), ((2, 2), {})], ids=["a", "b"])
    assert again == first and total() == 2
    with pytest.raises(ValueError, match="2 ids for 1 calls"):
        enqueue_many(tasks.add, [((1, 1), {})], ids=["a", "b"])


def test_enqueue_once_needs_a_ledger_backend(task_namespace: str) -> None:
    dummy = {
        "default": {"BACKEND": "django_ledger.tasks.LedgerBackend"},
        "dummy": {"BACKEND": f"{task.__module__.rpartition('.')[0]}.backends.dummy.DummyBackend"},
    }
    with override_settings(TASKS=dummy):
        elsewhere = tasks.add.using(backend="dummy")
        with pytest.raises(InvalidTask, match=re.escape("not django_ledger.tasks.LedgerBackend")):
            enqueue_once(elsewhere, "x", 1, 2)
