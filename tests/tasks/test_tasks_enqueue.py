"""Enqueue through Django's task API: results, validation, run_after, priority, bulk, async.

No worker here: these tests look at what an enqueue stores and answers. Each runs in a
namespace of its own (``task_namespace``). Idempotent enqueue is
``test_tasks_enqueue_once.py``'s.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from django_ledger import get_ledger
from django_ledger.core.records import ms_to_datetime
from django_ledger.queues import queues
from django_ledger.tasks import (
    LedgerBackend,
    LedgerTask,
    enqueue_many,
    enqueue_once,
)
from django_ledger.tasks.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    task,
    task_enqueued,
)
from tests.support.tasks_app import tasks

pytest_plugins = ["tests.support.tasks_fixtures"]


def total(queue: str = "default") -> int:
    return get_ledger(queue).stats().total


class Enqueued:
    """Collect ``task_enqueued`` signals (from any thread) while in the ``with`` block."""

    def __init__(self) -> None:
        self.events: list[tuple[type, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, sender: type, task_result: Any, **kwargs: Any) -> None:
        with self._lock:
            self.events.append((sender, task_result))

    def __enter__(self) -> Enqueued:
        task_enqueued.connect(self, weak=False)
        return self

    def __exit__(self, *exc: object) -> None:
        task_enqueued.disconnect(self)


# -- what an enqueue answers and stores -----------------------------------------------


def test_enqueue_answers_a_ready_result(task_namespace: str) -> None:
    result = tasks.add.enqueue(1, b=2)
    assert result.status == TaskResultStatus.READY
    assert result.task is tasks.add
    assert (result.args, result.kwargs) == ([1], {"b": 2})
    assert result.backend == "default"
    assert result.errors == [] and result.worker_ids == [] and result.attempts == 0
    assert result.enqueued_at is not None and result.enqueued_at.tzinfo is not None
    assert result.started_at is None and result.finished_at is None
    assert result.last_attempted_at is None and not result.is_finished
    with pytest.raises(ValueError, match="Task has not finished yet"):
        _ = result.return_value


def test_the_result_id_is_the_record_request_id(task_namespace: str) -> None:
    result = tasks.add.enqueue(1, 2)
    record = get_ledger("default").resolve(result.id)
    assert record is not None
    assert json.loads(record.payload) == {
        "v": 1,
        "task": "tests.support.tasks_app.tasks.add",
        "args": [1, 2],
        "kwargs": {},
    }
    assert record.created_at == round(result.enqueued_at.timestamp() * 1000)  # type: ignore[union-attr]


def test_get_result_from_another_thread_equals_the_enqueued_result(task_namespace: str) -> None:
    result = tasks.echo.enqueue(1, [2, 3], key={"nested": True})
    found: list[Any] = []
    thread = threading.Thread(target=lambda: found.append(tasks.echo.get_result(result.id)))
    thread.start()
    thread.join()
    assert found == [result]
    assert tasks.echo.get_result(result.id) is not result


@pytest.mark.django_db  # an id not in Redis may wait in the outbox (a table)
def test_an_unknown_id_does_not_exist(task_namespace: str) -> None:
    for result_id in ("nope", "", "a\nb", "x" * 300):
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result(result_id)


def test_a_result_of_another_task_is_a_mismatch(task_namespace: str) -> None:
    result = tasks.add.enqueue(1, 2)
    with pytest.raises(TaskResultMismatch, match=re.escape("tests.support.tasks_app.tasks.add")):
        tasks.noop.get_result(result.id)


def test_the_signal_goes_out_once_per_admission(task_namespace: str) -> None:
    with Enqueued() as seen:
        result = enqueue_once(tasks.add, "order-1", 1, 2)
        again = enqueue_once(tasks.add, "order-1", 1, 2)
    assert again.id == result.id == "order-1"
    assert [(sender, r.id, r.status) for sender, r in seen.events] == [
        (LedgerBackend, "order-1", TaskResultStatus.READY)
    ]
    assert seen.events[0][1].enqueued_at is not None


# -- bad input: Django's exceptions, or a clear error, and nothing written ------------


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ((datetime.now(),), TypeError, r"args\[0\] is of type datetime.datetime"),
        ((object(),), TypeError, r"args\[0\] is of type object"),
        ((float("nan"),), ValueError, r"args\[0\] is NaN"),
        (({1: "a", "b": 2},), TypeError, r"args\[0\] has keys of types that do not sort"),
        (("\ud800",), InvalidTask, "not UTF-8"),
    ],
)
def test_arguments_that_are_not_json_write_nothing(
    task_namespace: str, arguments: tuple[Any, ...], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        tasks.echo.enqueue(*arguments)
    assert total() == 0


def test_async_enqueue_refuses_what_json_cannot_hold(task_namespace: str) -> None:
    with pytest.raises(TypeError, match="Unsupported type"):
        asyncio.run(tasks.echo.aenqueue(datetime.now()))
    assert total() == 0


def test_a_queue_the_backend_does_not_serve_is_djangos_error(task_namespace: str) -> None:
    listed = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES": ["default"]}}
    with override_settings(TASKS=listed):
        with pytest.raises(
            InvalidTask, match=re.escape("Queue 'emails' is not valid for backend.")
        ):
            tasks.add.using(queue_name="emails")
        with pytest.raises(
            InvalidTask, match=re.escape("Queue 'emails' is not valid for backend.")
        ):
            tasks.on_emails.enqueue(1)  # declared under other settings: checked again
    assert total() == 0 and total("emails") == 0


def test_a_queue_missing_from_ledger_is_refused_at_enqueue(task_namespace: str) -> None:
    backends = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES": []}}
    with override_settings(TASKS=backends):
        elsewhere = tasks.add.using(queue_name="nowhere")  # QUEUES [] lets Django accept it
        with pytest.raises(InvalidTask, match=r"'nowhere' is not a queue of LEDGER\['QUEUES'\]"):
            elsewhere.enqueue(1, 2)
    assert total() == 0


def test_a_naive_run_after_is_refused_with_use_tz(task_namespace: str) -> None:
    with pytest.raises(InvalidTask, match=re.escape("run_after must be an aware datetime.")):
        tasks.add.using(run_after=datetime(2030, 1, 1)).enqueue(1, 2)
    assert total() == 0


def test_a_payload_over_the_queue_limit_is_refused(namespace: str) -> None:
    from tests.support.tasks_helpers import task_settings

    with task_settings(namespace, default={"MAX_PAYLOAD_BYTES": 100}):
        with pytest.raises(InvalidTask, match=r"MAX_PAYLOAD_BYTES \(100\)"):
            tasks.echo.enqueue("x" * 100)
        assert total() == 0
        tasks.echo.enqueue("x" * 10)
        assert total() == 1


def test_an_unusable_explicit_id_is_refused(task_namespace: str) -> None:
    for bad in ("", "a b\n", "x" * 300):
        with pytest.raises(ValueError, match="not usable"):
            enqueue_once(tasks.add, bad, 1, 2)
    with pytest.raises(TypeError, match="must be a str"):
        enqueue_once(tasks.add, 42, 1, 2)  # type: ignore[arg-type]
    assert total() == 0


def test_a_task_its_module_path_does_not_name_cannot_be_enqueued(task_namespace: str) -> None:
    with pytest.raises(InvalidTask, match="no worker could find it"):
        tasks.renamed.enqueue(1)
    assert total() == 0


def test_run_after_cannot_be_set_on_the_decorator() -> None:
    from django_ledger.tasks import task as ledger_task

    with pytest.raises(TypeError, match="run_after cannot be defined statically"):
        ledger_task(run_after=datetime(2030, 1, 1))
    with pytest.raises(TypeError, match="unknown option"):
        ledger_task(retries=3)


# -- run_after and priority ----------------------------------------------------------------


def test_run_after_becomes_the_due_time_on_the_server_clock(task_namespace: str) -> None:
    ledger = get_ledger("default")
    before = ledger.server_time_ms()
    target = before + 3_600_000
    result = tasks.add.using(run_after=ms_to_datetime(target)).enqueue(1, 2)
    after = ledger.server_time_ms()
    record = ledger.resolve(result.id)
    assert record is not None
    # delay = target - (the server's now at the enqueue); due = the server's now + delay.
    assert target <= record.due_at <= target + (after - before)
    assert result.task.run_after == ms_to_datetime(record.due_at)
    assert tasks.add.get_result(result.id).task.run_after == result.task.run_after
    assert ledger.stats().pending_later == 1


@pytest.mark.parametrize("past", [timedelta(hours=-1), "datetime"])
def test_a_run_after_in_the_past_reads_back_as_enqueued(task_namespace: str, past: Any) -> None:
    ledger = get_ledger("default")
    if past == "datetime":
        past = ms_to_datetime(ledger.server_time_ms() - 3_600_000)
    result = tasks.add.using(run_after=past).enqueue(1, 2)
    record = ledger.resolve(result.id)
    assert record is not None and record.due_at == record.created_at  # due at once
    read = tasks.add.get_result(result.id)
    assert result.task.run_after is None
    assert read.task == result.task
    assert (read.id, read.enqueued_at, read.args) == (result.id, result.enqueued_at, [1, 2])


def test_the_server_clock_decides_not_the_clients(task_namespace: str) -> None:
    ledger = queues.get("default").ledger
    ledger.clock_skew_ms = 2 * 3_600_000  # the server's clock two hours ahead of ours
    try:
        soon_by_our_clock = datetime.now().astimezone() + timedelta(hours=1)
        result = tasks.add.using(run_after=soon_by_our_clock).enqueue(1, 2)
        record = ledger.resolve(result.id)
        assert record is not None
        assert record.due_at == record.created_at  # already past on the server: due now
        assert ledger.stats().pending_due == 1
    finally:
        ledger.clock_skew_ms = 0


def test_run_after_may_be_a_timedelta(task_namespace: str) -> None:
    result = tasks.add.using(run_after=timedelta(minutes=5)).enqueue(1, 2)
    record = get_ledger("default").resolve(result.id)
    assert record is not None
    assert record.due_at - record.created_at == 300_000
    assert result.task.run_after == ms_to_datetime(record.due_at)


def test_priority_is_stored_on_the_record(task_namespace: str) -> None:
    result = tasks.add.using(priority=-7).enqueue(1, 2)
    record = get_ledger("default").resolve(result.id)
    assert record is not None and record.priority == -7
    assert tasks.add.get_result(result.id).task.priority == -7


@pytest.mark.parametrize("priority", [-101, 101, 3.1])
def test_priorities_outside_djangos_range_are_refused(priority: Any) -> None:
    with pytest.raises(
        InvalidTask, match=re.escape("priority must be a whole number between -100 and 100.")
    ):
        tasks.add.using(priority=priority)


# -- options -----------------------------------------------------------------------------


def test_options_travel_in_the_payload_only_when_a_call_changes_them(task_namespace: str) -> None:
    plain = tasks.flaky.enqueue(1)
    changed = tasks.flaky.using(max_attempts=2, timeout=timedelta(seconds=5)).enqueue(1)
    ledger = get_ledger("default")
    payloads = [json.loads(ledger.resolve(r.id).payload) for r in (plain, changed)]  # type: ignore[union-attr]
    assert "options" not in payloads[0]
    assert payloads[1]["options"] == {
        "max_attempts": 2,
        "backoff_base": 0.001,
        "backoff_cap": 0.002,
        "timeout": 5.0,
    }
    fetched = tasks.flaky.get_result(changed.id).task
    assert isinstance(fetched, LedgerTask)
    assert (fetched.max_attempts, fetched.timeout) == (2, 5.0)
    assert tasks.flaky.max_attempts == 4  # the declared task is unchanged


def test_using_checks_the_options() -> None:
    with pytest.raises(ValueError, match="max_attempts must be from 1"):
        tasks.add.using(max_attempts=0)
    with pytest.raises(TypeError, match="unknown option"):
        tasks.add.using(retries=3)
    with pytest.raises(ValueError, match="not a built-in exception"):
        tasks.add.using(retry_on=["NoSuchError"])
    changed = tasks.add.using(retry_on=[KeyError, "OSError", "shop.errors.Gone"])
    assert changed.retry_on == ("builtins.KeyError", "builtins.OSError", "shop.errors.Gone")


@pytest.mark.skipif(
    __import__("django").VERSION[:2] == (6, 0), reason="Django 6.0's @task passes no keywords"
)
def test_djangos_task_decorator_reaches_the_ledger_options() -> None:
    declared = task(max_attempts=3, timeout=10, unique=True)(tasks._impl)
    assert isinstance(declared, LedgerTask)
    assert (declared.max_attempts, declared.timeout, declared.unique) == (3, 10.0, True)


# -- bulk ------------------------------------------------------------------------------------


def fcall_calls(client: Any) -> int:
    return int(client.info("commandstats").get("cmdstat_fcall", {}).get("calls", 0))


@pytest.mark.standalone_only(reason="its fcall_calls reads INFO commandstats of one node")
def test_enqueue_many_admits_128_per_round_trip(task_namespace: str) -> None:
    client = get_ledger("default").redis
    before = fcall_calls(client)
    with Enqueued() as seen:
        results = enqueue_many(tasks.add, [((i, i), {}) for i in range(300)])
    assert fcall_calls(client) - before == 3  # 128 + 128 + 44
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
    # DummyBackend and ImmediateBackend have stand-ins (tests/tasks/test_tasks_stand_ins.py).
    other = {
        "default": {"BACKEND": "django_ledger.tasks.LedgerBackend"},
        "other": {"BACKEND": "tests.support.tasks_app.backends.ElsewhereBackend"},
    }
    with override_settings(TASKS=other):
        elsewhere = tasks.add.using(backend="other")
        with pytest.raises(InvalidTask, match=re.escape("not django_ledger.tasks.LedgerBackend")):
            enqueue_once(elsewhere, "x", 1, 2)


# -- async -------------------------------------------------------------------------------------


def test_aenqueue_and_aget_result(task_namespace: str) -> None:
    async def run() -> tuple[Any, Any]:
        result = await tasks.async_add.aenqueue(1, 2)
        return result, await tasks.async_add.aget_result(result.id)

    result, found = asyncio.run(run())
    assert found == result and result.status == TaskResultStatus.READY


@pytest.mark.standalone_only(reason="RedisCluster sends CLIENT PAUSE to one node, not the master")
def test_aenqueue_never_blocks_the_event_loop(task_namespace: str) -> None:
    """While Redis holds the admission back (CLIENT PAUSE), the loop goes on running."""
    pauser = get_ledger("default").redis
    tasks.add.enqueue(0, 0)  # connect and load the scripts before the pause

    async def run() -> tuple[bool, Any]:
        pauser.execute_command("CLIENT", "PAUSE", 10_000, "WRITE")
        try:
            pending = asyncio.ensure_future(tasks.add.aenqueue(1, 2))
            for _ in range(200):  # a blocking aenqueue would finish within the first of these
                await asyncio.sleep(0)
            waiting = not pending.done()
        finally:
            pauser.execute_command("CLIENT", "UNPAUSE")
        return waiting, await pending

    waiting, result = asyncio.run(run())
    assert waiting, "aenqueue held the event loop until Redis answered"
    assert tasks.add.get_result(result.id) == result


@pytest.mark.standalone_only(reason="RedisCluster sends CLIENT PAUSE to one node, not the master")
def test_aget_result_never_blocks_the_event_loop(task_namespace: str) -> None:
    result = tasks.add.enqueue(1, 2)
    client = get_ledger("default").redis

    async def run() -> tuple[bool, Any]:
        # ALL holds reads too (and an UNPAUSE from another connection), for one second.
        client.execute_command("CLIENT", "PAUSE", 1000, "ALL")
        pending = asyncio.ensure_future(tasks.add.aget_result(result.id))
        for _ in range(200):  # a blocking aget_result would finish within the first of these
            await asyncio.sleep(0)
        return not pending.done(), await pending

    waiting, found = asyncio.run(run())
    assert waiting and found == result
