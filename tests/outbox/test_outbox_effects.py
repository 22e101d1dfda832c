"""Fenced effects: a task's database writes apply once, and a stale attempt's are refused."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from django.contrib.auth.models import Group

from django_ledger.models import TaskEffect
from django_ledger.queues import queues
from django_ledger.services.relay import Relay
from django_ledger.tasks import LedgerTaskContext, StaleAttempt
from django_ledger.tasks.compat import TaskResultStatus
from tests.support import outbox_tasks
from tests.support.tasks_helpers import run_claimed, wait_until

pytest_plugins = ["tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


def _context(result: Any, fence: int) -> LedgerTaskContext:
    return LedgerTaskContext(task_result=result, fence=fence, max_attempts=3)


def _groups(name: str) -> int:
    return Group.objects.filter(name__startswith=f"{name}:").count()


def test_a_stale_attempts_effects_are_refused_and_rolled_back(task_namespace: str) -> None:
    result = outbox_tasks.fenced_write.enqueue("stale")
    assert outbox_tasks.fenced_write.call(_context(result, 7), "stale") == {"wrote": "stale"}
    with pytest.raises(StaleAttempt, match="fence 5 is lower than the fence 7"):
        outbox_tasks.fenced_write.call(_context(result, 5), "stale")
    assert _groups("stale") == 1
    row = TaskEffect.objects.get(pk=result.id)
    assert (row.fence, row.done) == (7, True)


def test_a_body_that_raises_leaves_no_effects_and_runs_again(task_namespace: str) -> None:
    from django_ledger.tasks import effects

    result = outbox_tasks.fenced_write.enqueue("raises")
    with pytest.raises(RuntimeError), effects(_context(result, 3)):
        Group.objects.create(name="raises:3")
        raise RuntimeError("the attempt fails")
    assert _groups("raises") == 0 and not TaskEffect.objects.exists()
    assert outbox_tasks.fenced_write.call(_context(result, 4), "raises") == {"wrote": "raises"}
    assert _groups("raises") == 1


def test_a_retry_after_a_kill_past_the_commit_skips_the_body(task_namespace: str) -> None:
    ledger = queues.get("default").ledger
    result = outbox_tasks.fenced_write.enqueue("killed")
    # The first attempt commits its effects, and its worker dies before settling.
    claim = ledger.claim("worker-dead", 0.05)
    assert claim is not None
    outbox_tasks.RUNS.clear()
    outbox_tasks.fenced_write.call(_context(result, claim.fence), "killed")
    assert outbox_tasks.RUNS == ["killed"]
    # Its lease runs out; repair puts the task back, and the next claim has a higher fence.
    wait_until(lambda: (ledger.repair(), ledger.stats().pending_due)[1] == 1)
    ran = run_claimed()
    assert ran is not None and ran[0].claim.fence > claim.fence
    assert outbox_tasks.RUNS == ["killed"]  # the body did not run again
    done = outbox_tasks.fenced_write.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == {"wrote": "killed"}
    assert _groups("killed") == 1


def test_old_effects_rows_are_pruned(task_namespace: str) -> None:
    from datetime import timedelta

    from django.utils import timezone

    TaskEffect.objects.create(task_id="old", fence=1, done=True, result="null")
    TaskEffect.objects.create(task_id="new", fence=1, done=True, result="null")
    TaskEffect.objects.filter(pk="old").update(updated_at=timezone.now() - timedelta(days=8))
    assert Relay(["default"], prune_days=7).prune() == 1
    assert list(TaskEffect.objects.values_list("pk", flat=True)) == ["new"]


def test_the_context_is_django_s_public_one(task_namespace: str) -> None:
    result = outbox_tasks.fenced_write.enqueue("ctx")
    context = _context(result, 1)
    assert replace(context, fence=2).fence == 2


def test_django_ledger_tasks_offers_every_name_it_lists() -> None:
    import django_ledger.tasks as tasks
    from django_ledger.outbox import courier, effects

    for name in tasks.__all__:
        assert getattr(tasks, name) is not None, name
    assert tasks.flush_outbox is courier.flush
    assert tasks.StaleAttempt is effects.StaleAttempt and tasks.Effects is effects.Effects
    assert callable(tasks.effects)  # the function, never a module of that name
