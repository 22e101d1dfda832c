"""``LedgerTestCase``: unittest's way to the kit, each test on a ledger of its own."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User

from django_ledger import get_ledger
from django_ledger.testing import LedgerTestCase, LedgerTransactionTestCase, TaskFailed
from tests.support.tasks_app import tasks as t

NAMESPACES: list[str] = []


class LedgerTestCaseTests(LedgerTestCase):
    def test_a_task_enqueued_then_run_sees_the_tests_rows(self) -> None:
        User.objects.create(username="grace")
        result = t.usernames.enqueue()
        self.assertEnqueued(t.usernames, args=[], count=1)
        report = self.runDueTasks()
        self.assertEqual(report.completed, [result.id])
        result.refresh()
        self.assertEqual(result.return_value, ["grace"])
        self.assertNotEnqueued(t.usernames)

    def test_a_failure_raises(self) -> None:
        t.complex_exception.enqueue()
        with self.assertRaisesMessage(TaskFailed, "This task failed"):
            self.runDueTasks()

    def test_each_test_has_a_namespace_of_its_own_a(self) -> None:
        self._own_namespace()

    def test_each_test_has_a_namespace_of_its_own_b(self) -> None:
        self._own_namespace()

    def _own_namespace(self) -> None:
        namespace = settings.LEDGER["NAMESPACE"]
        self.assertNotIn(namespace, NAMESPACES)
        NAMESPACES.append(namespace)
        self.assertEqual(get_ledger("default").stats().pending, 0)
        t.add.enqueue(1, 1)


class LedgerTransactionTestCaseTests(LedgerTransactionTestCase):
    def test_runs_tasks_too(self) -> None:
        result = t.add.enqueue(20, 22)
        self.runDueTasks()
        result.refresh()
        self.assertEqual(result.return_value, 42)
