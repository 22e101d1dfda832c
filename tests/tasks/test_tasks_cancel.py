"""Cancel a task, queued or running (``django_ledger.tasks.cancel``): read back FAILED, its
fenced effects refused once cancelled, and what committed before said so."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group

from django_ledger.models import TaskEffect
from django_ledger.queues import queues
from django_ledger.tasks import (
    Cancelled,
    LedgerTaskContext,
    StaleAttempt,
    cancel,
)
from django_ledger.tasks.compat import TaskResultDoesNotExist, TaskResultStatus
from tests.support import outbox_tasks
from tests.support.tasks_helpers import run_claimed

pytest_plugins = ["tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


def _context(result: Any, fence: int) -> LedgerTaskContext:
    return LedgerTaskContext(task_result=result, fence=fence, max_attempts=3)


def test_a_queued_task_cancelled_reads_back_failed_and_never_runs(task_namespace: str) -> None:
    result = outbox_tasks.fenced_write.enqueue("queued")
    outcome = cancel(result.id, by="alice", reason="ordered twice")
    assert (outcome.status, outcome.was, outcome.queue) == ("cancelled", "PENDING", "default")
    assert outcome.cancelled
    read = outbox_tasks.fenced_write.get_result(result.id)
    assert read.status == TaskResultStatus.FAILED
    error = read.errors[-1]
    assert error.exception_class is Cancelled
    assert "cancelled by alice at " in error.traceback
    assert error.traceback.endswith(": ordered twice")
    assert run_claimed() is None  # nothing to run: it never runs
    assert Group.objects.count() == 0


def test_a_running_tasks_later_effects_are_refused(task_namespace: str) -> None:
    result = outbox_tasks.fenced_write.enqueue("running")
    claim = queues.get("default").ledger.claim("worker-1", 30)
    assert claim is not None
    outcome = cancel(result.id, by="alice")
    assert (outcome.status, outcome.was, outcome.effects_committed) == (
        "cancelled",
        "CLAIMED",
        False,
    )
    assert outcome.fence > claim.fence
    # The cancelled run goes on and reaches its effects block: refused, nothing written.
    with pytest.raises(StaleAttempt):
        outbox_tasks.fenced_write.call(_context(result, claim.fence), "running")
    assert Group.objects.count() == 0
    row = TaskEffect.objects.get(pk=result.id)
    assert claim.fence < row.fence <= outcome.fence and not row.done


def test_effects_committed_before_the_cancel_stay_and_are_reported(task_namespace: str) -> None:
    result = outbox_tasks.fenced_write.enqueue("first")
    claim = queues.get("default").ledger.claim("worker-1", 30)
    assert claim is not None
    outbox_tasks.fenced_write.call(_context(result, claim.fence), "first")  # commits
    outcome = cancel(result.id, by="alice")
    assert (outcome.status, outcome.effects_committed) == ("cancelled", True)
    assert Group.objects.filter(name__startswith="first:").count() == 1
    row = TaskEffect.objects.get(pk=result.id)
    assert (row.fence, row.done) == (claim.fence, True)  # the committed effects stay


def test_an_ended_task_is_left_and_an_unknown_one_is_refused(task_namespace: str) -> None:
    result = outbox_tasks.fenced_write.enqueue("ended")
    assert run_claimed() is not None
    outcome = cancel(result.id, by="alice")
    assert (outcome.status, outcome.was) == ("ended", "COMPLETED")
    assert outbox_tasks.fenced_write.get_result(result.id).status == TaskResultStatus.SUCCESSFUL
    with pytest.raises(TaskResultDoesNotExist):
        cancel("no-such-task", by="alice")


def test_cancelled_is_a_base_exception_a_task_cannot_swallow(task_namespace: str) -> None:
    assert not issubclass(Cancelled, Exception)
    caught = Cancelled("stop", by="alice", at=5, reason="why")
    assert (caught.by, caught.at, caught.reason) == ("alice", 5, "why")


def test_no_submodule_of_the_tasks_package_hides_a_public_name() -> None:
    import importlib
    import pkgutil
    import types

    import django_ledger.tasks as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"django_ledger.tasks.{module.name}")
    hidden = [
        name for name in package.__all__ if isinstance(getattr(package, name), types.ModuleType)
    ]
    assert hidden == []
