"""Checks of ``LEDGER['SCHEDULES']``: shape, task, timing, time zone, queue, options, fit, monitor.

The same code types the setting for the scheduler (``django_ledger.schedules.config``),
so a schedule these checks pass is one the scheduler runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core import checks

from ..defaults import DEFAULTS, TOP_DEFAULTS
from ..schedules.config import problems
from .base import error as _error

__all__ = ["check_schedules"]


def check_schedules(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Check every schedule of ``LEDGER['SCHEDULES']`` (ids E070 to E079, E090 to E093, E098, E099)."""
    raw = getattr(settings, "LEDGER", {})
    if not isinstance(raw, dict):
        return []  # check_settings reports it
    queues = raw.get("QUEUES", TOP_DEFAULTS["QUEUES"])
    if not isinstance(queues, dict):
        return []  # check_settings reports it
    overrides = raw.get("DEFAULTS")
    defaults = {**DEFAULTS, **overrides} if isinstance(overrides, dict) else DEFAULTS
    return [
        _error(problem.id, problem.message, problem.hint, problem.where)
        for problem in problems(raw.get("SCHEDULES"), queues, defaults)
    ]
