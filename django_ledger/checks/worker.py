"""Checks of what the worker will run: each raw queue's ``HANDLER``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.translation import gettext

from .base import error as _error
from .base import imported

__all__ = ["check_handlers"]


def check_handlers(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Each ``LEDGER['QUEUES'][name]['HANDLER']`` must be a dotted path to a callable."""
    raw = getattr(settings, "LEDGER", {})
    queues = raw.get("QUEUES") if isinstance(raw, dict) else None
    if not isinstance(queues, dict):
        return []  # check_settings says what is wrong with the shape
    errors: list[checks.CheckMessage] = []
    for name, overrides in queues.items():
        if not isinstance(overrides, dict) or "HANDLER" not in overrides:
            continue
        path, where = overrides["HANDLER"], f"LEDGER['QUEUES'][{name!r}]['HANDLER']"
        hint = gettext("Give the dotted path of a function that takes one argument, the job.")
        if not isinstance(path, str) or "." not in path:
            errors.append(
                _error(
                    80,
                    gettext("Must be a dotted path, got %(path)r.") % {"path": path},
                    hint,
                    where,
                )
            )
            continue
        handler, why = imported(path)
        if why is not None:
            errors.append(
                _error(
                    80,
                    gettext("%(path)r does not import: %(why)s.") % {"path": path, "why": why},
                    hint,
                    where,
                )
            )
            continue
        if not callable(handler):
            errors.append(
                _error(81, gettext("%(path)r is not callable.") % {"path": path}, hint, where)
            )
    return errors
