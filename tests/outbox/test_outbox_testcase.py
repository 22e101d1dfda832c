"""In a ``TestCase`` (``pytest.mark.django_db``): the test's own transaction is not the caller's.

Django's ``TestCase`` wraps each test in ``atomic()`` blocks; an enqueue under them alone
admits at once, as the same code does in production (autocommit), while one inside the
test's own ``atomic()`` is staged, and admitted when Django runs the on-commit callbacks
(``captureOnCommitCallbacks(execute=True)``), as for any ``on_commit`` code.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import SimpleTestCase, TestCase

from django_ledger.models import OutboxEntry
from django_ledger.queues import queues
from django_ledger.tasks.compat import TaskResultDoesNotExist, TaskResultStatus, task_backends
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed

pytest_plugins = ["tests.support.tasks_fixtures"]


def _pending() -> int:
    return queues.get("default").ledger.stats().pending


@pytest.mark.django_db
def test_an_enqueue_in_a_test_case_admits_at_once(task_namespace: str) -> None:
    assert transaction.get_connection().in_atomic_block  # the test case's own block
    result = tasks.add.enqueue(1, 2)
    assert _pending() == 1 and not OutboxEntry.objects.exists()
    assert run_claimed() is not None
    assert tasks.add.get_result(result.id).return_value == 3


@pytest.mark.django_db
def test_one_in_the_tests_own_atomic_waits_for_the_on_commit_callbacks(
    task_namespace: str,
) -> None:
    with TestCase.captureOnCommitCallbacks(execute=True):
        with transaction.atomic():
            result = tasks.add.enqueue(2, 2)
            assert OutboxEntry.objects.filter(pk=result.id).exists()
        assert _pending() == 0  # "committed", but the test case's callbacks wait
        assert tasks.add.get_result(result.id).status == TaskResultStatus.READY
    assert _pending() == 1 and not OutboxEntry.objects.exists()


@pytest.mark.usefixtures("task_namespace")
class UnknownIdInASimpleTestCase(SimpleTestCase):
    """A ``SimpleTestCase`` may not touch the database: ``get_result`` needs none for this."""

    def test_get_result_of_an_unknown_id_does_not_exist(self) -> None:
        with self.assertRaises(TaskResultDoesNotExist):
            tasks.add.get_result("never-enqueued")
        with self.assertRaises(TaskResultDoesNotExist):
            task_backends["default"].get_result("never-enqueued")
