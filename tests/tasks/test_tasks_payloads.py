"""The enqueue's fast parts: payload templates, per-task plans, buffered id tails.

Each must give what the plain way gives: a template the bytes of ``json.dumps`` of the
whole document (idempotent admission compares bytes), a kept plan the queue's current
options, and ids their randomness in a forked child too.
"""

from __future__ import annotations

import json
import multiprocessing
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_ledger import get_ledger
from django_ledger.core.jobs import PayloadTemplate, encode_task
from django_ledger.tasks import enqueue_many, enqueue_once
from django_ledger.tasks.resolve import random_id
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import task_settings

pytest_plugins = ["tests.support.tasks_fixtures"]

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
_options = st.none() | st.fixed_dictionaries(
    {}, optional={"max_attempts": st.integers(1, 9), "retry_on": st.lists(st.text(), max_size=2)}
)


def plain(task: str, args: list[Any], kwargs: dict[str, Any], options: Any) -> str:
    """The payload as one ``json.dumps`` of the whole document writes it."""
    document: dict[str, Any] = {"v": 1, "task": task, "args": args, "kwargs": kwargs}
    if options:
        document["options"] = options
    return json.dumps(
        document, ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=True
    )


@settings(max_examples=300, deadline=None)
@given(
    st.text(min_size=1),
    st.lists(_json, max_size=4),
    st.dictionaries(st.text(), _json, max_size=4),
    _options,
)
def test_a_template_writes_the_bytes_of_the_whole_document(
    task: str, args: list[Any], kwargs: dict[str, Any], options: Any
) -> None:
    expected = plain(task, args, kwargs, options)
    assert PayloadTemplate(task, options).encode(args, kwargs) == expected
    assert encode_task(task, tuple(args), kwargs, options) == expected


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ([float("nan")], {}, ValueError),
        ([object()], {}, TypeError),
        ([], {"a": 1, 2: "b"}, TypeError),  # keys of mixed types do not sort
    ],
)
def test_a_template_refuses_what_json_cannot_hold(
    args: list[Any], kwargs: dict[Any, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        PayloadTemplate("a.b").encode(args, kwargs)


def test_a_template_checks_its_task_and_options() -> None:
    with pytest.raises(TypeError, match="non-empty dotted path"):
        PayloadTemplate("")
    with pytest.raises(ValueError, match="unknown task option"):
        PayloadTemplate("a.b", {"colour": "red"})


def fcall_calls(client: Any) -> int:
    return int(client.info("commandstats").get("cmdstat_fcall", {}).get("calls", 0))


@pytest.mark.standalone_only(reason="its fcall_calls reads INFO commandstats of one node")
def test_one_enqueue_is_one_script_call(task_namespace: str) -> None:
    client = get_ledger("default").redis
    tasks.add.enqueue(0, 0)  # the queue's entry and the task's plan are made here
    before = fcall_calls(client)
    for i in range(5):
        tasks.add.enqueue(i, i)
    assert fcall_calls(client) - before == 5


def test_a_kept_plan_follows_the_queue_options(namespace: str) -> None:
    with task_settings(namespace):
        assert tasks.add.enqueue(1, 2).id != tasks.add.enqueue(1, 2).id
    with task_settings(namespace, default={"UNIQUE": True}):
        assert tasks.add.enqueue(1, 2).id == tasks.add.enqueue(1, 2).id
    with task_settings(namespace):
        assert tasks.add.enqueue(1, 2).id != tasks.add.enqueue(1, 2).id


def test_a_bulk_enqueue_gives_each_result_its_due_time(task_namespace: str) -> None:
    later = tasks.add.using(run_after=timedelta(minutes=5))
    results = enqueue_many(later, [((i, i), {}) for i in range(3)])
    ledger = get_ledger("default")
    for result in results:
        record = ledger.resolve(result.id)
        assert record is not None and record.due_at - record.created_at == 300_000
        assert result.task.run_after is not None
        assert round(result.task.run_after.timestamp() * 1000) == record.due_at
        assert result.enqueued_at is not None
        assert round(result.enqueued_at.timestamp() * 1000) == record.created_at


def _tails_of_child(connection: Any) -> None:
    connection.send([random_id()[16:] for _ in range(50)])
    connection.close()


def test_a_forked_child_draws_tails_of_its_own() -> None:
    random_id()  # the parent holds drawn tails now
    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe()
    child = context.Process(target=_tails_of_child, args=(theirs,))
    child.start()
    child_tails = set(ours.recv())
    child.join(timeout=30)
    parent_tails = {random_id()[16:] for _ in range(50)}
    assert child.exitcode == 0
    assert not child_tails & parent_tails
    assert len(child_tails) == 50


def test_a_given_id_of_none_is_refused_not_generated(task_namespace: str) -> None:
    with pytest.raises(TypeError, match="must be a str, not NoneType"):
        enqueue_many(tasks.add, [((1, 1), {})], ids=[None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be a str, not NoneType"):
        enqueue_once(tasks.add, None, 1, 1)  # type: ignore[arg-type]
    assert get_ledger("default").stats().total == 0


# -- a READY result without normalizing plain arguments again ---------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
_args = st.recursive(
    _scalars | st.binary(max_size=4).map(lambda b: b.decode("latin-1").encode("utf-8")),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_args, max_size=4), st.dictionaries(st.text(max_size=4), _args, max_size=3))
def test_a_ready_result_is_the_one_django_builds(args: list[Any], kwargs: dict[str, Any]) -> None:
    """Where ``plain_call`` holds, ``ready_result`` equals ``TaskResult(...)`` field by field;
    where it does not, normalizing would have changed something (or refused it)."""
    from django_ledger.tasks.compat import TaskResultStatus, normalize_json
    from django_ledger.tasks.results import LedgerTaskResult, plain_call, ready_result

    def django_result() -> Any:
        # The backend's results are LedgerTaskResult (TaskResult and what a task reported),
        # built here by the dataclass's own __init__, as Django builds a TaskResult.
        return LedgerTaskResult(
            task=tasks.add,
            id="the-id",
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend="default",
            errors=[],
            worker_ids=[],
        )

    if plain_call(tuple(args), kwargs):
        ours = ready_result(tasks.add, "the-id", list(args), dict(kwargs), "default")
        theirs = django_result()
        assert ours == theirs
        assert [type(a) for a in ours.args] == [type(a) for a in theirs.args]
        assert (
            ours.errors == []
            and ours.errors is not ready_result(tasks.add, "x", [], {}, "default").errors
        )  # each result its own lists
    else:
        assert any(not isinstance(a, str | int | float | bool | type(None)) for a in args) or any(
            not isinstance(v, str | int | float | bool | type(None)) for v in kwargs.values()
        )
        try:
            normalized = normalize_json(list(args))
        except (TypeError, ValueError):
            return
        assert isinstance(normalized, list)


def test_an_enqueue_of_tuples_and_bytes_is_normalized_as_django_does(task_namespace: str) -> None:
    result = tasks.echo.enqueue((1, 2), b"bytes", key={"t": (3,)})
    assert result.args == [[1, 2], "bytes"]
    assert result.kwargs == {"key": {"t": [3]}}
    record = get_ledger("default").resolve(result.id)
    assert record is not None
    assert json.loads(record.payload)["args"] == [[1, 2], "bytes"]


def test_an_admission_knows_its_times_without_its_record(namespace: str) -> None:
    from django_ledger.core.results import AdmissionStatus

    with task_settings(namespace):
        ledger = get_ledger("default")
        for delay in (0, timedelta(seconds=90)):
            answer = ledger.admit(random_id(), "p", delay)
            assert answer.status is AdmissionStatus.ADMITTED and answer.times is not None
            record = ledger.resolve(answer.request_id)
            assert record is not None
            assert answer.times == (record.created_at, record.due_at)
            again = ledger.admit(answer.request_id, "p", delay)
            assert again.status is AdmissionStatus.DUPLICATE and again.times is None
