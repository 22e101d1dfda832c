"""``run_due_tasks()``: what is due, run in-process as a worker would (``tasks/inline.py``)."""

from __future__ import annotations

from collections.abc import Iterable

from ..conf import ledger_settings
from ..tasks import inline
from ..tasks.backend import LedgerBackend
from ..tasks.compat import task_backends
from ..tasks.inline import DEFAULT_LIMIT, RunReport, TaskFailed

__all__ = ["RunReport", "TaskFailed", "run_due_tasks", "task_queues"]


def task_queues() -> list[str]:
    """The task queues of every ``LedgerBackend`` in ``TASKS``, each once, in order.

    A queue with a raw ``HANDLER`` is left out: its jobs are not Django tasks.
    """
    raw = {name for name, options in ledger_settings.queues.items() if "HANDLER" in options}
    names: list[str] = []
    for alias in task_backends.settings:
        backend = task_backends[alias]
        if isinstance(backend, LedgerBackend):
            for name in backend.lookup_queues():
                if name not in names and name not in raw:
                    names.append(name)
    return names


def run_due_tasks(
    queues: Iterable[str] | None = None,
    *,
    limit: int = DEFAULT_LIMIT,
    raise_errors: bool = True,
) -> RunReport:
    """Run every task due on ``queues`` (default: all of ``TASKS``'s) until none is due.

    A task enqueued by a task, or a workflow step its settlement released, runs in the
    same call. A retry waits for its backoff, as in production: it runs again in this
    call only if it falls due before nothing else is (each failed attempt is listed in
    ``retrying``). With ``raise_errors`` (the default) the first task that fails for good
    raises ``TaskFailed`` with its error and traceback, the runs before it settled; so
    does, at the end, a task that failed and still waits for its retry.
    More than ``limit`` runs raise ``RuntimeError`` (a task that enqueues itself).
    """
    if isinstance(queues, str):
        raise TypeError("queues must be a list of queue names, not one string")
    names = task_queues() if queues is None else list(queues)
    return inline.run_due_tasks(names, limit=limit, raise_errors=raise_errors)
