"""Idempotent enqueue: an explicit id or a unique task is admitted once.

``enqueue_once`` under an explicit id, ``UNIQUE`` tasks and queues keyed by their
arguments, eight threads at once, and ``aenqueue_once``: one admission, one
``task_enqueued`` signal, and a clear error when an id is reused for other work.
Written with the testing kit (``django_ledger.testing``): each test on a ledger of its
own, what waits read by ``assert_enqueued``, the signals by ``captured_tasks``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.conf import settings

from django_ledger.tasks import TaskIdConflict, aenqueue_once, enqueue_once
from django_ledger.testing import assert_enqueued, captured_tasks
from tests.support.tasks_app import tasks
from tests.tasks.test_tasks_enqueue import total

pytest_plugins = ["django_ledger.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _own_ledger(ledger_redis: Any) -> None:
    """Every test here on a ledger of its own (the kit's throwaway Redis)."""


def test_an_explicit_id_is_admitted_once() -> None:
    first = enqueue_once(tasks.add, "order-1042:receipt", 1, 2)
    again = enqueue_once(tasks.add, "order-1042:receipt", 1, 2)
    assert again == first
    assert total() == 1
    assert [call.id for call in assert_enqueued(tasks.add, args=[1, 2])] == [first.id]
    with pytest.raises(TaskIdConflict, match="'order-1042:receipt'"):
        enqueue_once(tasks.add, "order-1042:receipt", 1, 3)
    with pytest.raises(TaskIdConflict, match="'order-1042:receipt'"):
        enqueue_once(tasks.echo, "order-1042:receipt", 1, 2)
    assert total() == 1


def test_a_unique_task_is_admitted_once_per_arguments() -> None:
    first = tasks.unique_add.enqueue(a=1, b=2)
    assert tasks.unique_add.enqueue(b=2, a=1).id == first.id  # keyword order does not count
    other = tasks.unique_add.enqueue(a=2, b=1)
    assert other.id != first.id
    assert first.id.startswith("unique:")
    assert total() == 2
    assert_enqueued(tasks.unique_add, kwargs={"a": 1, "b": 2}, count=1)


def test_a_unique_queue_makes_every_task_unique() -> None:
    from tests.support.tasks_helpers import task_settings

    with task_settings(settings.LEDGER["NAMESPACE"], default={"UNIQUE": True}):
        assert tasks.add.enqueue(1, 2).id == tasks.add.enqueue(1, 2).id
        assert tasks.add.using(unique=False).enqueue(1, 2).id != tasks.add.enqueue(1, 2).id
        assert total() == 2


@pytest.mark.parametrize("kind", ["explicit", "unique"])
def test_eight_threads_at_once_make_one_admission(kind: str) -> None:
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

    with captured_tasks() as seen:
        threads = [threading.Thread(target=enqueue) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(results) == 8
    assert len({result.id for result in results}) == 1
    assert len(seen) == 1
    assert total() == 1


def test_aenqueue_once_is_idempotent_too() -> None:
    async def twice() -> tuple[Any, Any]:
        first = await aenqueue_once(tasks.add, "async-1", 1, 2)
        return first, await aenqueue_once(tasks.add, "async-1", 1, 2)

    first, again = asyncio.run(twice())
    assert first == again and total() == 1
