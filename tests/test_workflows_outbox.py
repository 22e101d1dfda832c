"""A workflow enqueued inside ``transaction.atomic()``: one outbox row, delivered on commit.

In-process: ``run_until_settled`` plays a worker's steps; the relay delivers what a failed
on-commit delivery left behind. Also the API's checks of bad shapes, which need no worker.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from django_ledger.models import OutboxEntry
from django_ledger.services.relay import Relay
from django_ledger.tasks.compat import InvalidTask
from django_ledger.tasks.store import queues
from django_ledger.tasks.workflows import (
    Workflow,
    WorkflowDoesNotExist,
    chain,
    chord,
    get_workflow,
    group,
    si,
    sig,
)
from tests.tasks_app import tasks
from tests.tasks_app import workflow_tasks as t
from tests.tasks_helpers import run_until_settled

pytest_plugins = ["tests.tasks_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


def _pending() -> int:
    return int(queues.get("default").ledger.stats().pending)


def test_a_rolled_back_transaction_builds_no_workflow(task_namespace: str) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        flow = chain(sig(t.plus, 1), sig(t.plus)).enqueue(id="rolled")
        assert flow.staged
        raise RuntimeError("roll back")
    with pytest.raises(WorkflowDoesNotExist):
        get_workflow("rolled")
    assert OutboxEntry.objects.count() == 0
    assert _pending() == 0


def test_a_committed_workflow_is_delivered_whole_on_commit(task_namespace: str) -> None:
    with transaction.atomic():
        flow = chain(sig(t.plus, 1), sig(t.plus), sig(t.plus)).enqueue(id="committed")
        again = chain(sig(t.plus, 1), sig(t.plus), sig(t.plus)).enqueue(id="committed")
        assert OutboxEntry.objects.count() == 1  # one row holds the whole workflow
        with pytest.raises(WorkflowDoesNotExist):
            get_workflow("committed")  # nothing in Redis before the commit
        assert _pending() == 0
    assert again.id == flow.id
    assert OutboxEntry.objects.count() == 0
    assert [s.state for s in get_workflow("committed").steps] == ["PENDING", "WAITING", "WAITING"]
    run_until_settled()
    assert get_workflow("committed").results == {"0": 2, "1": 3, "2": 4}


def test_a_row_delivered_again_by_the_relay_builds_nothing_twice(task_namespace: str) -> None:
    with transaction.atomic():
        chord([sig(t.square, n) for n in range(5)], si(t.plus, 0)).enqueue(id="relayed")
        row = OutboxEntry.objects.get()
    assert get_workflow("relayed").step("5").state == "WAITING"  # delivered on commit
    # A committer that died after admitting and before deleting leaves its row behind.
    OutboxEntry.objects.create(id=row.id, backend=row.backend, queue=row.queue, payload=row.payload)
    assert Relay().run_once() == 1
    assert OutboxEntry.objects.count() == 0
    assert _pending() == 5  # the roots once, not twice
    run_until_settled()
    state = get_workflow("relayed")
    assert state.successful and state.step("5").return_value == 1
    assert len(state.steps) == 6


def test_bad_shapes_are_refused_before_anything_is_written(task_namespace: str) -> None:
    graph = Workflow()
    graph.add(sig(t.plus, 1), name="a")
    graph.add(sig(t.plus), after=["nope"], name="b")
    with pytest.raises(ValueError, match="not an earlier step"):
        graph.enqueue(id="bad")
    with pytest.raises(InvalidTask, match="several queues"):
        chain(sig(t.plus, 1), sig(tasks.add.using(queue_name="emails"), 1)).enqueue(id="bad")
    with pytest.raises(TypeError, match="sig"):
        chain(sig(t.plus, 1), t.plus).enqueue(id="bad")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="JSON cannot hold"):
        chain(sig(t.plus, object())).enqueue(id="bad")
    with pytest.raises(WorkflowDoesNotExist):
        get_workflow("bad")


def test_a_group_then_a_group_gets_lists(task_namespace: str) -> None:
    shape: Any = chain(group(sig(t.plus, 1), sig(t.plus, 2)), group(sig(t.seen, key="k1")))
    flow = shape.enqueue(id="groups")
    run_until_settled()
    assert get_workflow(flow.id).results["2"] == [[2, 3]]


def test_a_rolled_back_savepoints_workflow_gives_way_to_the_committed_one(
    task_namespace: str,
) -> None:
    with transaction.atomic():
        tasks.add.enqueue(0, 0)  # the transaction's callback, registered outside the savepoint
        with pytest.raises(RuntimeError), transaction.atomic():
            chain(sig(t.plus, 100), sig(t.plus)).enqueue(id="twice")
            raise RuntimeError("roll the savepoint back")
        chain(sig(t.plus, 1), sig(t.plus), sig(t.plus)).enqueue(id="twice")
    assert OutboxEntry.objects.count() == 0
    assert len(get_workflow("twice").steps) == 3  # the committed workflow, not the rolled-back one
    run_until_settled()
    assert get_workflow("twice").results == {"0": 2, "1": 3, "2": 4}
