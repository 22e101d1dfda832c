"""What ``stage`` writes, and what the commit does: ids staged twice, conflicts, statements.

The common enqueue costs one ``INSERT`` in the caller's transaction and, after the
commit, one admission and one ``DELETE``; an id staged again with the same payload is
kept once, with another payload it is ``TaskIdConflict`` and that call writes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from django_ledger.models import OutboxEntry
from django_ledger.queues import queues
from django_ledger.tasks import enqueue_many, enqueue_once
from django_ledger.tasks.compat import TaskResultStatus
from django_ledger.tasks.exceptions import TaskIdConflict
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed

pytest_plugins = ["tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


def _stats() -> Any:
    return queues.get("default").ledger.stats()


def test_an_enqueue_costs_one_insert_and_after_the_commit_one_delete(
    task_namespace: str,
) -> None:
    with transaction.atomic():  # the first one looks up the table, once per process
        tasks.add.enqueue(0, 0)
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        result = tasks.add.enqueue(1, 2)
    statements = [query["sql"].split()[0] for query in queries.captured_queries]
    assert [s for s in statements if s not in ("BEGIN", "COMMIT")] == ["INSERT", "DELETE"]
    assert _stats().pending == 2 and not OutboxEntry.objects.exists()
    assert tasks.add.get_result(result.id).status == TaskResultStatus.READY


def test_an_id_staged_twice_with_the_same_call_is_admitted_once(task_namespace: str) -> None:
    with transaction.atomic():
        first = enqueue_once(tasks.add, "order-7:add", 3, 4)
        again = enqueue_once(tasks.add, "order-7:add", 3, 4)
        assert OutboxEntry.objects.count() == 1
    assert first.id == again.id == "order-7:add"
    assert _stats().pending == 1
    ran = run_claimed()
    assert ran is not None and ran[0].claim.request_id == "order-7:add"
    assert run_claimed() is None


def test_an_id_staged_with_another_call_is_a_conflict_and_writes_nothing(
    task_namespace: str,
) -> None:
    with transaction.atomic():
        enqueue_once(tasks.add, "order-8:add", 1, 1)
        with pytest.raises(TaskIdConflict):
            enqueue_many(tasks.add, [((5, 5), {}), ((2, 2), {})], ids=["fresh-1", "order-8:add"])
        # The conflicting call left no row, not even for its other (fresh) id.
        assert list(OutboxEntry.objects.values_list("id", flat=True)) == ["order-8:add"]
    assert _stats().pending == 1


def test_a_released_savepoints_tasks_are_delivered(task_namespace: str) -> None:
    with transaction.atomic():
        with transaction.atomic():
            inner = tasks.add.enqueue(6, 6)
        with transaction.atomic(savepoint=False):
            flat = tasks.add.enqueue(7, 7)
    assert _stats().pending == 2 and not OutboxEntry.objects.exists()
    ran = {run_claimed()[0].claim.request_id for _ in range(2)}  # type: ignore[index]
    assert ran == {inner.id, flat.id}


def test_a_rolled_back_savepoints_once_id_gives_way_to_the_committed_call(
    task_namespace: str,
) -> None:
    with transaction.atomic():
        tasks.add.enqueue(0, 0)  # the transaction's callback, registered outside the savepoint
        with pytest.raises(RuntimeError), transaction.atomic():
            enqueue_once(tasks.add, "order-1:receipt", 1, 1)
            raise RuntimeError("roll the savepoint back")
        committed = enqueue_once(tasks.add, "order-1:receipt", 20, 22)
    assert _stats().pending == 2 and not OutboxEntry.objects.exists()
    record = queues.get("default").ledger.resolve("order-1:receipt")
    assert record is not None and "[20,22]" in record.payload
    ran = {run_claimed()[0].claim.request_id for _ in range(2)}  # type: ignore[index]
    assert "order-1:receipt" in ran
    assert tasks.add.get_result(committed.id).return_value == 42
