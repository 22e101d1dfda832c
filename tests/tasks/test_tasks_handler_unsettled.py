"""``TaskHandler`` and attempts whose worker never settled them, in-process.

An attempt whose worker died shows as lease expired, a task whose last worker died is
failed, a time-out settles a ``TimeoutError``, old tracebacks are cut to their last line,
and a task failed unrun says why.
"""

from __future__ import annotations

from django_ledger import get_ledger
from django_ledger.core.jobs import Attempt, encode_task
from django_ledger.core.records import State
from django_ledger.core.worker.handler import Job
from django_ledger.queues import queues
from django_ledger.tasks import LeaseExpired
from django_ledger.tasks.attempt import bounded as _bounded
from django_ledger.tasks.compat import TaskResultStatus
from django_ledger.tasks.handler import KEPT_TRACEBACKS, TaskHandler
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed, task_settings
from tests.tasks.test_tasks_handler import admit_raw

pytest_plugins = ["tests.support.tasks_fixtures"]


def expire_and_repair(queue: str = "default") -> None:
    """Move the queue's clock past every lease (the test seam), then repair."""
    ledger = queues.get(queue).ledger
    ledger.clock_skew_ms += 31_000
    list(ledger.repair_cycle())


def test_an_attempt_whose_worker_died_shows_as_lease_expired(task_namespace: str) -> None:
    result = tasks.add.enqueue(1, 2)
    ledger = queues.get("default").ledger
    assert ledger.claim("dead-worker") is not None  # claimed, never settled
    expire_and_repair()
    ready = tasks.add.get_result(result.id)
    assert ready.status == TaskResultStatus.READY and ready.worker_ids == ["dead-worker"]
    assert ready.errors[0].exception_class is LeaseExpired
    run_claimed(worker_id="w-2")
    done = tasks.add.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == 3
    assert done.worker_ids == ["dead-worker", "w-2"]  # repair recorded who died
    assert done.errors[0].exception_class is LeaseExpired


def test_a_task_whose_last_worker_died_is_failed(namespace: str) -> None:
    with task_settings(namespace, default={"MAX_ATTEMPTS": 1}):
        result = tasks.add.enqueue(1, 2)
        assert queues.get("default").ledger.claim("dead-worker") is not None
        expire_and_repair()
        assert queues.get("default").ledger.resolve(result.id).state is State.DEAD  # type: ignore[union-attr]
        failed = tasks.add.get_result(result.id)
        assert failed.status == TaskResultStatus.FAILED and failed.is_finished
        assert [e.exception_class for e in failed.errors] == [LeaseExpired]
        assert failed.finished_at is not None


def test_timed_out_settles_a_timeout_error(task_namespace: str) -> None:
    result = tasks.hangs.enqueue()
    ledger = get_ledger("default")
    handler = TaskHandler("default")
    for expected in (State.PENDING, State.FAILED):
        claim = ledger.claim("w", 30)
        if claim is None:
            from tests.support.tasks_helpers import wait_until

            wait_until(lambda: ledger.stats().pending_due == 1)
            claim = ledger.claim("w", 30)
        assert claim is not None
        previous = ledger.results([claim.request_id])[0]
        job = Job(claim, "default", "w", claim.lease_until - 30_000, previous)
        plan = handler.plan(job)
        job.cancelled.set()  # the worker gives up on the run, then asks how it ends
        outcome = handler.timed_out(job, plan)
        assert outcome.state is expected
        ledger.settle(claim, outcome.state, outcome.delay, outcome.result)
    failed = tasks.hangs.get_result(result.id)
    assert [e.exception_class for e in failed.errors] == [TimeoutError, TimeoutError]
    assert "ran past its timeout of 0.2 s" in failed.errors[1].traceback


def test_old_tracebacks_are_cut_to_their_last_line() -> None:
    error = {"exception_class_path": "builtins.ValueError", "traceback": "Traceback\n  x\nV: n\n"}
    attempts = [Attempt(f"w{i}", i + 1, i + 2, error) for i in range(40)]
    kept = _bounded(attempts)
    full = [i for i, a in enumerate(kept) if a.error and a.error["traceback"].startswith("Trace")]
    assert full == [0, *range(40 - KEPT_TRACEBACKS, 40)]
    assert kept[5].error == {"exception_class_path": "builtins.ValueError", "traceback": "V: n\n"}
    assert _bounded(attempts[:KEPT_TRACEBACKS]) == attempts[:KEPT_TRACEBACKS]


def test_a_task_failed_unrun_shows_why(task_namespace: str) -> None:
    """A worker that cannot plan a job settles it FAILED with no result document."""
    from django_ledger.tasks import NotRun
    from django_ledger.tasks.state import task_state

    admit_raw(encode_task("tests.support.tasks_app.tasks.add", [1, 2], {}))
    ledger = queues.get("default").ledger
    claim = ledger.claim("w-9")
    assert claim is not None
    ledger.settle(claim, State.FAILED)  # as the worker does when plan() raises
    state = task_state("default", ledger.resolve("raw-1"), None)  # type: ignore[arg-type]
    assert state.status == "FAILED" and state.worker_ids == ["w-9"]
    assert [e["exception_class_path"] for e in state.errors] == [
        "django_ledger.tasks.exceptions.NotRun"
    ]
    assert tasks.add.get_result("raw-1").errors[0].exception_class is NotRun
