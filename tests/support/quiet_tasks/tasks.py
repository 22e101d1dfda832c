"""The quiet app's one task: nothing, so that a run measures the worker."""

from __future__ import annotations

from typing import Any

from django_ledger.tasks.compat import task


@task(queue_name="quiet")
def noop(*args: Any, **kwargs: Any) -> None:
    """Return nothing."""
