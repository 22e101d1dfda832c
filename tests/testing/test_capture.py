"""``captured_tasks()`` and ``assert_enqueued``: what a block enqueued, and what waits."""

from __future__ import annotations

from typing import Any

import pytest

from django_ledger.tasks import enqueue_once
from django_ledger.testing import (
    assert_enqueued,
    captured_tasks,
    enqueued_tasks,
    refute_enqueued,
    run_due_tasks,
)
from tests.support.tasks_app import tasks as t

pytest_plugins = ["django_ledger.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _own_ledger(ledger_redis: Any) -> None:
    """Every test here on a ledger of its own."""


def test_a_block_captures_each_call_it_admitted_in_order() -> None:
    before = t.add.enqueue(0, 0)
    with captured_tasks() as enqueued:
        first = t.add.enqueue(1, 2)
        second = t.on_emails.enqueue(3)
    assert [result.id for result in enqueued] == [first.id, second.id]
    assert enqueued[0].args == [1, 2] and enqueued[1].task.queue_name == "emails"
    assert before.id not in [result.id for result in enqueued]


def test_a_repeat_of_a_unique_call_is_captured_once() -> None:
    with captured_tasks() as enqueued:
        first = t.unique_add.enqueue(1, 1)
        again = t.unique_add.enqueue(1, 1)
        once = enqueue_once(t.add, "order-42", args=[5, 5])
        once_again = enqueue_once(t.add, "order-42", args=[5, 5])
    assert first.id == again.id and once.id == once_again.id
    assert [result.id for result in enqueued] == [first.id, once.id]


def test_nothing_is_captured_after_the_block() -> None:
    with captured_tasks() as enqueued:
        pass
    t.add.enqueue(1, 1)
    assert enqueued == []


def test_assert_enqueued_matches_task_arguments_and_queue() -> None:
    result = t.add.enqueue(2, 3)
    t.add.enqueue(2, 3)
    t.on_emails.enqueue(9)
    found = assert_enqueued(t.add, args=[2, 3], count=2)
    assert result.id in [call.id for call in found]
    assert_enqueued(t.add)
    assert_enqueued("tests.support.tasks_app.tasks.on_emails", args=[9], queue="emails", count=1)
    assert_enqueued(t.echo, count=0)
    refute_enqueued(t.add, args=[3, 2])
    refute_enqueued(t.on_emails, queue="default")


def test_kwargs_match_as_given() -> None:
    t.echo.enqueue(1, colour="blue")
    assert_enqueued(t.echo, args=[1], kwargs={"colour": "blue"}, count=1)
    refute_enqueued(t.echo, kwargs={"colour": "red"})


def test_a_miss_says_what_waits() -> None:
    t.add.enqueue(1, 2)
    with pytest.raises(AssertionError) as raised:
        assert_enqueued(t.add, args=[2, 1])
    message = str(raised.value)
    assert "expected at least one call of tests.support.tasks_app.tasks.add args=[2, 1]" in message
    assert "found 0; waiting: 1" in message and "args=[1, 2]" in message


def test_a_wrong_count_fails() -> None:
    t.add.enqueue(1, 2)
    with pytest.raises(AssertionError, match="expected 2 call"):
        assert_enqueued(t.add, count=2)
    with pytest.raises(AssertionError, match="expected 0 call"):
        refute_enqueued(t.add)


def test_what_ran_no_longer_waits_and_deferred_calls_do() -> None:
    from datetime import timedelta

    t.add.enqueue(1, 1)
    later = t.add.using(run_after=timedelta(hours=1)).enqueue(4, 4)
    run_due_tasks()
    assert [call.id for call in enqueued_tasks()] == [later.id]
    refute_enqueued(t.add, args=[1, 1])


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="a task or its dotted path"):
        assert_enqueued(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="count must be 0 or more"):
        assert_enqueued(t.add, count=-1)
    with pytest.raises(TypeError, match="not one string"):
        enqueued_tasks("default")
