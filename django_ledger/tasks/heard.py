"""Whether sending one of Django's task signals now would do anything.

Django connects a receiver of its own to each task signal (``log_task_enqueued``,
``log_task_started``, ``log_task_finished``): each writes one log line. Sending a signal
whose one receiver is that, when no handler would write its line, only costs: the
``TaskResult`` the signal carries, the dispatch, a ``LogRecord``, the handlers' filters.
With Django's default logging and ``DEBUG`` off, the ``django`` logger's handlers are
the console (``require_debug_true``) and the admins' mail (``ERROR`` and above), so a
worker's two INFO lines per task are built and dropped. ``heard`` says when to skip.

It answers "not heard" only when it is sure: Django's own receiver alone, and for every
handler its line would reach, a level above the line's or a filter that Django's
settings make refuse everything (``RequireDebugTrue`` with ``DEBUG`` off,
``RequireDebugFalse`` with it on). Any other receiver, any other filter, no handler at
all (Python's last resort) at a level it writes, or a logging machinery that something
has patched (an error tracker's integration, which sees records no handler writes)
count as heard.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.conf import settings
from django.utils.log import RequireDebugFalse, RequireDebugTrue

__all__ = ["emits", "heard"]

#: What Django's own receiver of each signal is called, in django.tasks or the backport.
_OWN = {
    "task_enqueued": "log_task_enqueued",
    "task_started": "log_task_started",
    "task_finished": "log_task_finished",
}
_MODULES = ("django.tasks.signals", "django_tasks.signals")
#: The methods a record goes through; patched ones (not logging's own) see everything.
_PATH = ("_log", "handle", "callHandlers", "makeRecord")


def heard(signal: Any, name: str, level: int) -> bool:
    """Whether sending ``signal`` (Django's ``name``; its own line at ``level``) would act."""
    receivers = signal.receivers
    if not receivers:
        return False
    own = _own(signal, name)
    if own is None:
        return True
    function, own_logger = own
    for entry in receivers:
        key = entry[0] if isinstance(entry, tuple) and entry else None
        # Django keys a receiver connected without a dispatch_uid by (id(receiver), id(sender)).
        if not isinstance(key, tuple) or not key or key[0] != id(function):
            return True
    return emits(own_logger, level)


def emits(logger: logging.Logger, level: int) -> bool:
    """Whether a record of ``level`` logged on ``logger`` now would reach a handler's output."""
    if not logger.isEnabledFor(level):
        return False
    if any(getattr(logging.Logger, method).__module__ != "logging" for method in _PATH):
        return True
    if logger.filters:
        return True  # a filter of the logger's own may do anything with the record
    found = False
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            found = True
            if level >= handler.level and not _refuses(handler):
                return True
        if not current.propagate:
            break
        current = current.parent
    if not found:
        last = logging.lastResort
        return last is not None and level >= last.level
    return False


def _refuses(handler: logging.Handler) -> bool:
    """Whether one of ``handler``'s filters refuses every record under these settings."""
    if not handler.filters:
        return False
    refusing = RequireDebugFalse if settings.DEBUG else RequireDebugTrue
    return any(type(found) is refusing for found in handler.filters)


#: ``_own``'s answers: the signal's id -> (Django's receiver, its logger).
_FOUND: dict[int, tuple[Any, logging.Logger]] = {}


def _own(signal: Any, name: str) -> tuple[Any, logging.Logger] | None:
    """Django's own receiver of ``signal`` (named ``name`` there) and its logger."""
    found = _FOUND.get(id(signal))
    if found is not None:
        return found
    for module_name in _MODULES:
        module = sys.modules.get(module_name)
        if module is None or getattr(module, name, None) is not signal:
            continue
        function = getattr(module, _OWN[name], None)
        own_logger = getattr(module, "logger", None)
        if function is not None and isinstance(own_logger, logging.Logger):
            _FOUND[id(signal)] = (function, own_logger)
            return function, own_logger
    return None
