"""An enqueue refuses at once what a worker would refuse to run (``TaskRefused``).

A task sent to a queue it is not declared for, or with options that loosen its declared
and queue limits, raises ``InvalidTask`` at ``enqueue`` and admits nothing, rather than
ending FAILED when a worker claims it. A declared extra queue and tightened options
enqueue as before.
"""

from __future__ import annotations

import pytest

from django_ledger import get_ledger
from django_ledger.tasks.compat import InvalidTask, TaskResultStatus
from tests.support.tasks_app import tenancy

pytest_plugins = ["tests.support.tasks_fixtures"]


def _count(queue: str) -> int:
    return get_ledger(queue).stats().total


def test_a_queue_the_task_is_not_declared_for_is_refused_at_enqueue(task_namespace: str) -> None:
    before = _count("default")
    with pytest.raises(InvalidTask, match="declared for queue\\(s\\) 'emails', not 'default'"):
        tenancy.emails_only.using(queue_name="default").enqueue(1)
    assert _count("default") == before


def test_a_declared_extra_queue_is_taken(task_namespace: str) -> None:
    result = tenancy.both.using(queue_name="reports").enqueue(2)
    assert result.status == TaskResultStatus.READY
    assert get_ledger("reports").resolve(result.id) is not None


@pytest.mark.parametrize(
    "options",
    [{"timeout": 0}, {"timeout": 60}, {"lease": 100 * 365 * 86_400}, {"max_attempts": 50}],
    ids=["no-timeout", "longer-timeout", "century-lease", "more-attempts"],
)
def test_options_that_loosen_a_limit_are_refused_at_enqueue(
    task_namespace: str, options: dict[str, float]
) -> None:
    before = _count("default")
    with pytest.raises(InvalidTask, match="bounded"):
        tenancy.bounded.using(**options).enqueue()
    assert _count("default") == before


def test_options_that_tighten_a_limit_are_taken(task_namespace: str) -> None:
    result = tenancy.bounded.using(timeout=1, max_attempts=2).enqueue()
    assert result.status == TaskResultStatus.READY
