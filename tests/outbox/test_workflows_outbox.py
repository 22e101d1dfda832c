"""A workflow enqueued inside ``transaction.atomic()``: one outbox row, delivered on commit.

In-process: ``run_until_settled`` plays a worker's steps; the relay delivers what a failed
on-commit delivery left behind. Also the API's checks of bad shapes, which need no worker.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import pytest
from django.db import transaction

from django_ledger.models import OutboxEntry
from django_ledger.outbox.models import OutboxKind
from django_ledger.queues import queues
from django_ledger.services.relay import Relay
from django_ledger.tasks.compat import InvalidTask
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
from tests.support.tasks_app import tasks
from tests.support.tasks_app import workflow_tasks as t
from tests.support.tasks_helpers import run_until_settled

pytest_plugins = ["tests.support.tasks_fixtures"]
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
    OutboxEntry.objects.create(
        id=row.id, backend=row.backend, queue=row.queue, payload=row.payload, kind=row.kind
    )
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


def _bad_graphs() -> list[tuple[Workflow, str, str]]:
    """Graphs the ledger refuses, with the words of the refusal; and the id they use."""
    unknown = Workflow()
    unknown.add(sig(t.plus, 1), name="a")
    unknown.add(sig(t.plus), after=["nope"], name="b")
    twice = Workflow()
    twice.add(sig(t.plus, 1), name="a")
    twice.add(sig(t.plus, 2), name="a")
    itself = Workflow()
    itself.add(sig(t.plus, 1), name="a", after=["a"])
    failing = Workflow()
    failing.add(sig(t.plus, 1), name="a")
    failing.add(sig(t.plus), name="b", after=["a"], on_failure="ignore")
    fine = Workflow()
    fine.add(sig(t.plus, 1), name="a")
    return [
        (unknown, "bad-unknown", "not an earlier step"),
        (twice, "bad-twice", "given twice"),
        (itself, "bad-itself", "not an earlier step"),
        (failing, "bad-failing", "on_failure must be one of"),
        (fine, "", "workflow id is not usable"),
    ]


@pytest.mark.parametrize("inside", [False, True], ids=["outside", "in-atomic"])
def test_bad_shapes_are_refused_at_enqueue_in_a_transaction_too(
    task_namespace: str, inside: bool
) -> None:
    for graph, flow_id, words in _bad_graphs():
        with transaction.atomic() if inside else nullcontext():
            with pytest.raises(ValueError, match=words):
                graph.enqueue(id=flow_id)
            assert OutboxEntry.objects.count() == 0
        if flow_id:
            with pytest.raises(WorkflowDoesNotExist):
                get_workflow(flow_id)
    assert _pending() == 0


@pytest.mark.parametrize("inside", [False, True], ids=["outside", "in-atomic"])
def test_a_sharded_queue_refuses_a_workflow_plainly(task_namespace: str, inside: bool) -> None:
    from tests.support.tasks_helpers import task_settings

    with task_settings(task_namespace, default={"SHARDS": 2}):
        with transaction.atomic() if inside else nullcontext():
            with pytest.raises(InvalidTask, match="workflows need a queue of one shard"):
                chain(sig(t.plus, 1), sig(t.plus)).enqueue(id="sharded")
            assert OutboxEntry.objects.count() == 0
        assert queues.get("default").ledger.stats().pending == 0


def test_a_workflow_row_for_a_sharded_queue_is_dropped_by_the_relay_not_kept(
    task_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    from django_ledger.core.flows import FlowStep
    from django_ledger.core.jobs import encode_task
    from django_ledger.outbox.workflow_rows import row_id, row_of
    from tests.support.tasks_helpers import task_settings

    # As an earlier version staged it; a task row staged beside it is delivered.
    payload = encode_task("tests.support.tasks_app.workflow_tasks.plus", [1], {})
    OutboxEntry.objects.create(
        id=row_id("old-sharded"),
        backend="default",
        queue="default",
        payload=row_of("old-sharded", [FlowStep("0", payload)]),
        kind=OutboxKind.WORKFLOW,
    )
    with task_settings(task_namespace, default={"SHARDS": 2}):
        with transaction.atomic():
            tasks.add.enqueue(1, 1)
        assert Relay().run_once() == 1
        assert OutboxEntry.objects.count() == 0
        assert queues.get("default").ledger.stats().pending == 1
    assert "workflows need a queue of one shard" in caplog.text
