"""The benchmarks' tasks (module level, as Django requires)."""

from __future__ import annotations

from typing import Any

from django_ledger.tasks.compat import task


@task
def noop(*args: Any, **kwargs: Any) -> None:
    """Return nothing."""
