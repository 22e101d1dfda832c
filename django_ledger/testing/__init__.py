"""The testing kit: a throwaway Redis, in-process runs, and assertions on what was enqueued.

Everything runs on the real ledger (a ``redis-server`` the kit starts), never a fake:
``run_due_tasks`` runs what is due through the worker's own handler and settles it;
``captured_tasks`` and ``assert_enqueued`` say what a block enqueued and what waits.
pytest fixtures: ``django_ledger.testing.pytest_plugin``; unittest: ``LedgerTestCase``.
docs/testing.md shows them at work.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Imported on first use: the pytest plugin imports ``redis`` before Django is set up.
_EXPORTS = {
    "RedisServer": "redis",
    "RedisServerError": "redis",
    "RunReport": "running",
    "TaskFailed": "running",
    "run_due_tasks": "running",
    "Enqueued": "capture",
    "assert_enqueued": "capture",
    "captured_tasks": "capture",
    "enqueued_tasks": "capture",
    "refute_enqueued": "capture",
    "isolated_ledger": "isolation",
    "LedgerTestCase": "cases",
    "LedgerTestMixin": "cases",
    "LedgerTransactionTestCase": "cases",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
