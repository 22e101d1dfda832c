"""The ledger's entry points under Django's ``DummyBackend`` and ``ImmediateBackend``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_ledger.tasks import TaskIdConflict, enqueue_many, enqueue_once
from django_ledger.tasks.compat import InvalidTask, task, task_backends
from django_ledger.tasks.workflows import chain, sig
from tests.support.tasks_app import tasks as t
from tests.support.tasks_app import workflow_tasks as w

BACKENDS = task.__module__.rpartition(".")[0] + ".backends"
DUMMY = f"{BACKENDS}.dummy.DummyBackend"
IMMEDIATE = f"{BACKENDS}.immediate.ImmediateBackend"


@pytest.fixture(params=[DUMMY, IMMEDIATE], ids=["dummy", "immediate"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    with override_settings(TASKS={"default": {"BACKEND": request.param}}):
        yield request.param


def ran(result: Any, backend: str) -> None:
    """What each backend does with a call: Dummy stores it, Immediate runs it."""
    assert result.status == ("READY" if backend == DUMMY else "SUCCESSFUL")


def test_enqueue_once_answers_its_first_result_for_a_repeat(backend: str) -> None:
    first = enqueue_once(t.add, "invoice-1", 1, 2)
    again = enqueue_once(t.add, "invoice-1", 1, 2)
    assert again is first
    ran(first, backend)
    if backend == DUMMY:
        assert [kept.id for kept in task_backends["default"].results] == [first.id]  # once
    else:
        assert first.return_value == 3


def test_enqueue_once_with_other_arguments_is_a_conflict(backend: str) -> None:
    enqueue_once(t.add, "invoice-2", 1, 2)
    with pytest.raises(TaskIdConflict, match="'invoice-2' is taken"):
        enqueue_once(t.add, "invoice-2", 2, 1)
    with pytest.raises(TaskIdConflict):
        enqueue_once(t.echo, "invoice-2", 1, 2)
    enqueue_once(t.add, "invoice-3", 2, 1)  # another id is another call


def test_a_new_tasks_setting_forgets_the_ids(backend: str) -> None:
    first = enqueue_once(t.add, "invoice-4", 1, 2)
    with override_settings(TASKS={"default": {"BACKEND": backend}}):
        assert enqueue_once(t.add, "invoice-4", 1, 2) is not first


def test_dummy_clear_forgets_the_ids() -> None:
    with override_settings(TASKS={"default": {"BACKEND": DUMMY}}):
        first = enqueue_once(t.add, "invoice-5", 1, 2)
        task_backends["default"].clear()
        again = enqueue_once(t.add, "invoice-5", 1, 2)
        assert again is not first
        assert [kept.id for kept in task_backends["default"].results] == [again.id]


def test_enqueue_many_is_a_loop_of_enqueues(backend: str) -> None:
    results = enqueue_many(t.add, [((n, n), {}) for n in range(3)])
    assert len({result.id for result in results}) == 3
    for result in results:
        ran(result, backend)
    if backend == IMMEDIATE:
        assert [result.return_value for result in results] == [0, 2, 4]


def test_enqueue_many_with_ids_is_enqueue_once_each(backend: str) -> None:
    first = enqueue_many(t.add, [((1, 1), {}), ((2, 2), {})], ids=["a", "b"])
    again = enqueue_many(t.add, [((1, 1), {}), ((2, 2), {})], ids=["a", "b"])
    assert all(x is y for x, y in zip(first, again, strict=True))
    with pytest.raises(ValueError, match="2 ids for 1 calls"):
        enqueue_many(t.add, [((1, 1), {})], ids=["a", "b"])


def test_a_bad_id_is_refused(backend: str) -> None:
    with pytest.raises(InvalidTask, match="non-empty string"):
        enqueue_once(t.add, "", 1, 2)


@pytest.mark.parametrize(
    ("path", "why"),
    [(DUMMY, "DummyBackend never runs tasks"), (IMMEDIATE, "ImmediateBackend keeps no ledger")],
)
def test_a_workflow_is_refused_in_one_sentence(path: str, why: str) -> None:
    with (
        override_settings(TASKS={"default": {"BACKEND": path}}),
        pytest.raises(InvalidTask) as raised,
    ):
        chain(sig(w.plus, 1), sig(w.plus)).enqueue()
    message = str(raised.value)
    assert message.startswith(f"Workflows need django_ledger.tasks.LedgerBackend: {why}, ")
    assert re.search(r"use LedgerBackend with OPTIONS\['EAGER'\]", message)
    assert message.count(". ") == 0  # one sentence
