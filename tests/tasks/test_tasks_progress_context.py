"""The context's reporting calls outside a worker, and under another backend's context."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from django_ledger.tasks import LedgerTaskContext
from django_ledger.tasks.progress import report_progress
from tests.support.tasks_app import tasks

pytest_plugins = ["tests.support.tasks_fixtures"]


def test_a_hand_made_context_checks_reports_and_keeps_metadata(task_namespace: str) -> None:
    result = tasks.add.enqueue(1, 2)
    context = LedgerTaskContext(task_result=result, fence=1, max_attempts=1)
    context.set_progress(1, 2, "half")
    with pytest.raises(ValueError):
        context.set_progress(-1)
    context.set_metadata({"a": 1}, b=2)
    with pytest.raises(TypeError):  # refused whole: the dict stays as it was
        context.set_metadata(c=object())
    assert context.metadata == {"a": 1, "b": 2}


def test_report_progress_does_nothing_under_another_backends_context() -> None:
    report_progress(SimpleNamespace(attempt=1), 5, 10, "no set_progress here")
    seen: list[tuple[object, ...]] = []
    report_progress(SimpleNamespace(set_progress=lambda *a: seen.append(a)), 5, 10, "n")
    assert seen == [(5, 10, "n")]
