"""The testing kit for unittest: ``LedgerTestCase`` and ``LedgerTransactionTestCase``.

Each test runs on a ledger of its own (``isolation.py``): ``LEDGER`` on the process's
throwaway ``redis-server``, in a namespace deleted after the test. The helpers are the
kit's functions as methods, named in unittest's style.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.test import TestCase, TransactionTestCase

from .capture import _ANY, Enqueued, assert_enqueued, refute_enqueued
from .isolation import isolated_ledger, shared_server
from .redis import RedisServerError
from .running import RunReport, run_due_tasks

__all__ = ["LedgerTestCase", "LedgerTestMixin", "LedgerTransactionTestCase"]


class LedgerTestMixin:
    """Give each test a ledger of its own, and the kit's helpers as methods."""

    def _callSetUp(self) -> None:  # unittest's hook around setUp: no super() to forget
        try:
            server = shared_server()
        except RedisServerError as error:  # an error, not a skip: a skip would hide it
            raise RedisServerError(f"the ledger's tests need Redis: {error}") from error
        context = isolated_ledger(server)
        context.__enter__()
        self.addCleanup(context.__exit__, None, None, None)  # type: ignore[attr-defined]
        super()._callSetUp()  # type: ignore[misc]

    def runDueTasks(self, queues: Iterable[str] | None = None, **options: Any) -> RunReport:
        return run_due_tasks(queues, **options)

    def assertEnqueued(
        self,
        task: Any,
        *,
        args: Sequence[Any] = _ANY,
        kwargs: dict[str, Any] = _ANY,
        queue: str | None = None,
        count: int | None = None,
    ) -> list[Enqueued]:
        return assert_enqueued(task, args=args, kwargs=kwargs, queue=queue, count=count)

    def assertNotEnqueued(
        self,
        task: Any,
        *,
        args: Sequence[Any] = _ANY,
        kwargs: dict[str, Any] = _ANY,
        queue: str | None = None,
    ) -> None:
        refute_enqueued(task, args=args, kwargs=kwargs, queue=queue)


class LedgerTestCase(LedgerTestMixin, TestCase):
    """A ``TestCase`` on a ledger of its own: tasks run in the test's transaction."""


class LedgerTransactionTestCase(LedgerTestMixin, TransactionTestCase):
    """A ``TransactionTestCase`` on a ledger of its own (outbox and on-commit enqueues)."""
