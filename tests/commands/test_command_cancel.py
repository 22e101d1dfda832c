"""``manage.py ledger_cancel QUEUE ID [ID ...]``: what it says per id, and its exit code."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_ledger import State
from django_ledger.queues import queues
from tests.support import outbox_tasks

pytest_plugins = ["tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ledger_cancel", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_queued_running_and_ended_ids_exit_zero(task_namespace: str) -> None:
    ledger = queues.get("default").ledger
    ids = [outbox_tasks.fenced_write.enqueue(name).id for name in ("a", "b")]
    claim = ledger.claim("worker-1", 30)
    assert claim is not None
    running = claim.request_id
    queued = next(i for i in ids if i != running)
    out, err = run("default", queued, running, "--reason", "not wanted", "--by", "ops")
    assert f"{queued}: cancelled (it was PENDING; fence " in out
    assert f"{running}: cancelled (it was CLAIMED; fence " in out
    assert err == ""
    for request_id in ids:
        record = ledger.resolve(request_id)
        assert record is not None and record.state is State.FAILED
    doc = outbox_tasks.fenced_write.get_result(queued)
    assert "cancelled by ops at " in doc.errors[-1].traceback
    out, _ = run("default", queued)  # again: it has ended, which is no failure
    assert f"{queued}: had already ended as FAILED; left as it is" in out


def test_a_missing_or_bad_id_exits_one_and_the_rest_are_cancelled(task_namespace: str) -> None:
    queued = outbox_tasks.fenced_write.enqueue("c").id
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match=r"^2 of 3 ids not cancelled$"):
        call_command("ledger_cancel", "default", "nope", queued, "bad\nid", stdout=out, stderr=err)
    assert f"{queued}: cancelled" in out.getvalue()
    assert "nope: no such record in this queue" in err.getvalue()
    assert "bad\nid: refused: " in err.getvalue()


def test_an_unknown_queue_is_a_clear_error(task_namespace: str) -> None:
    with pytest.raises(CommandError, match="nowhere"):
        run("nowhere", "x")
