"""Bad input at the task layer: deep, cyclic and non-JSON arguments, records it cannot read.

An enqueue refuses what no reader could read, with ``TypeError``/``ValueError`` naming
the task and the argument's place, and writes nothing; ``get_result`` answers every
record a clear error or the result, never ``RecursionError`` nor a bad option's
``ValueError``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest

from django_ledger import CorruptRecord, State, get_ledger
from django_ledger.core.jobs import MAX_PAYLOAD_DEPTH, encode_task
from django_ledger.tasks import LeaseExpired, enqueue_many, enqueue_once
from django_ledger.tasks.compat import TaskResultDoesNotExist, TaskResultStatus
from tests.support.ledger_helpers import corrupt
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed, wait_until

pytest_plugins = ["tests.support.tasks_fixtures"]

ECHO = "tests.support.tasks_app.tasks.echo"


def total() -> int:
    return get_ledger("default").stats().total


def nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def cyclic() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


# -- enqueue ---------------------------------------------------------------------------

ENQUEUES = {
    "enqueue": lambda *a, **k: tasks.echo.enqueue(*a, **k),
    "aenqueue": lambda *a, **k: asyncio.run(tasks.echo.aenqueue(*a, **k)),
    "enqueue_once": lambda *a, **k: enqueue_once(tasks.echo, "mine-1", *a, **k),
    "enqueue_many": lambda *a, **k: enqueue_many(tasks.echo, [((), {}), (a, k)]),
}


@pytest.mark.parametrize("how", list(ENQUEUES))
@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((nested(100),), {}, ValueError, r"args\[0\] nests deeper than 64"),
        ((nested(5_000),), {}, ValueError, r"args\[0\] nests deeper than 64"),
        ((1,), {"deep": nested(5_000)}, ValueError, r'kwargs\["deep"\] nests deeper than 64'),
        ((cyclic(),), {}, ValueError, r"args\[0\]\[0\] refers to itself"),
        ((), {"when": datetime(2026, 1, 1)}, TypeError, r'kwargs\["when"\] is of type datetime'),
        (({"x": datetime(2026, 1, 1)},), {}, TypeError, r'args\[0\]\["x"\] is of type datetime'),
    ],
    ids=["deep", "very-deep", "deep-kwarg", "cyclic", "datetime-kwarg", "datetime-inside"],
)
def test_an_argument_no_reader_could_read_is_refused_by_task_and_place(
    task_namespace: str,
    how: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message) as caught:
        ENQUEUES[how](*args, **kwargs)
    assert ECHO in str(caught.value)
    assert not isinstance(caught.value, RecursionError)
    assert total() == 0


def test_the_deepest_arguments_allowed_are_enqueued_and_read_back(task_namespace: str) -> None:
    # The payload's own object and its args array are two of the levels.
    deepest = nested(MAX_PAYLOAD_DEPTH - 2)
    result = tasks.echo.enqueue(deepest)
    assert tasks.echo.get_result(result.id).args == [deepest]
    with pytest.raises(ValueError, match="nests deeper"):
        tasks.echo.enqueue([deepest])


# -- get_result of records the task layer did not write ------------------------------


def test_get_result_of_a_payload_nested_too_deep_says_why(task_namespace: str) -> None:
    inner = "[" * 5_000 + "]" * 5_000
    get_ledger("default").admit("deep-1", '{"args":[' + inner + f'],"task":"{ECHO}","v":1}}')
    with pytest.raises(TaskResultDoesNotExist, match="deeper than 67") as caught:
        tasks.echo.get_result("deep-1")
    assert "deep-1" in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [{"lease": -1}, {"max_attempts": 0}, {"timeout": "soon", "backoff_cap": -3}],
)
def test_get_result_ignores_a_stored_option_it_cannot_use(
    task_namespace: str, options: dict[str, Any]
) -> None:
    get_ledger("default").admit("opt-1", encode_task(ECHO, [1], {"k": 2}, options))
    result = tasks.echo.get_result("opt-1")
    assert (result.status, result.args, result.kwargs) == (TaskResultStatus.READY, [1], {"k": 2})
    for name in options:  # the declared task's option, as if the payload set none
        assert getattr(result.task, name) == getattr(tasks.echo, name)


def test_get_result_of_a_corrupt_or_quarantined_record_is_corrupt_record(
    task_namespace: str,
) -> None:
    ledger = get_ledger("default")
    result = tasks.echo.enqueue(1)
    corrupt(ledger, result.id)
    with pytest.raises(CorruptRecord) as before:
        tasks.echo.get_result(result.id)
    assert before.value.request_id == result.id
    assert ledger.repair_page().quarantined == 1
    with pytest.raises(CorruptRecord) as after:
        tasks.echo.get_result(result.id)
    assert after.value.request_id == result.id


def test_lease_expired_is_exported_where_the_docs_say(task_namespace: str) -> None:
    ledger = get_ledger("default")
    result = tasks.add.enqueue(1, 2)
    claim = ledger.claim("gone-1", lease=0.001)
    assert claim is not None and claim.request_id == result.id

    def taken_back() -> bool:  # the lease expired unsettled: repair takes the task back
        ledger.repair_page()
        record = ledger.resolve(result.id)
        return record is not None and record.state is State.PENDING

    wait_until(taken_back)
    assert run_claimed() is not None
    errors = tasks.add.get_result(result.id).errors
    assert errors[0].exception_class is LeaseExpired
