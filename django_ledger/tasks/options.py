"""The options Django's task API leaves out: attempts, backoff, retries, time limits, unique.

Each option can be set per task (``@task(max_attempts=5)`` on Django 6.1, or
``django_ledger.tasks.task`` anywhere, or ``.using(max_attempts=5)``), per queue
(``LEDGER['QUEUES'][name]``, upper case: ``MAX_ATTEMPTS``, ``BACKOFF_BASE``, ...), and
in a payload (``"options"``, for other languages); the first that says wins, then the
built-in default. Values are normalised once, when a task is declared, into what a JSON
payload holds: seconds as numbers, exception classes as dotted paths.
"""

from __future__ import annotations

import builtins
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..core.jobs import OPTION_NAMES
from ..core.timing import MAX_DURATION_MS
from ..core.worker.handler import Backoff

__all__ = [
    "BACKEND_OPTION_DEFAULTS",
    "DEFAULT_RETRY_ON",
    "OPTION_NAMES",
    "QUEUE_OPTION_KEYS",
    "TaskOptions",
    "backend_option_problem",
    "exception_path",
    "normalize_option",
    "resolve_options",
    "retries",
]

#: Exceptions that retry unless a task or queue says otherwise: any ``Exception`` (not
#: ``SystemExit`` or ``KeyboardInterrupt``).
DEFAULT_RETRY_ON: tuple[str, ...] = ("builtins.Exception",)
#: ``LEDGER['QUEUES'][name]`` keys of task options (``MAX_ATTEMPTS`` and ``LEASE`` are
#: the ledger's own queue settings, read as task options too).
QUEUE_OPTION_KEYS: dict[str, str] = {
    "BACKOFF_BASE": "backoff_base",
    "BACKOFF_CAP": "backoff_cap",
    "RETRY_ON": "retry_on",
    "TIMEOUT": "timeout",
    "UNIQUE": "unique",
}
#: ``TASKS[alias]['OPTIONS']`` of a ``LedgerBackend``, and their defaults.
BACKEND_OPTION_DEFAULTS: dict[str, Any] = {
    # The most UTF-8 bytes a task's JSON return value may take; past it the attempt
    # fails with ResultTooLarge. At most the smallest MAX_PAYLOAD_BYTES of its queues.
    "MAX_RESULT_BYTES": 65_536,
}

_MAX_SECONDS = MAX_DURATION_MS / 1000
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def exception_path(kind: type[BaseException]) -> str:
    """Return the dotted path Django's ``TaskError`` names an exception class by."""
    return f"{kind.__module__}.{kind.__qualname__}"


def _seconds(name: str, value: Any, *, zero_ok: bool) -> float:
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f"{name} must be a timedelta or a number of seconds, not {value!r}")
    low_ok = seconds >= 0 if zero_ok else seconds > 0
    if not math.isfinite(seconds) or not low_ok or seconds > _MAX_SECONDS:
        low = "at least 0" if zero_ok else "more than 0"
        raise ValueError(f"{name} must be {low} and at most 100 years of seconds, got {value!r}")
    return seconds


def _retry_on(value: Any) -> tuple[str, ...]:
    if isinstance(value, str | type) or not isinstance(value, Iterable):
        raise TypeError(
            f"retry_on must be a list of exception classes or dotted paths, not {value!r}"
        )
    paths: list[str] = []
    for item in value:
        if isinstance(item, type) and issubclass(item, BaseException):
            paths.append(exception_path(item))
        elif isinstance(item, str) and _PATH.fullmatch(item):
            named = getattr(builtins, item, None) if "." not in item else None
            if isinstance(named, type) and issubclass(named, BaseException):
                item = f"builtins.{item}"
            elif "." not in item:
                raise ValueError(f"retry_on: {item!r} is not a built-in exception or a dotted path")
            paths.append(item)
        else:
            raise ValueError(f"retry_on: {item!r} is not an exception class or a dotted path")
    return tuple(paths)


def normalize_option(name: str, value: Any) -> Any:
    """Check one option and return it as a payload holds it; raise TypeError/ValueError."""
    if name == "max_attempts":
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"max_attempts must be an int, not {value!r}")
        if not 1 <= value <= 1_000_000:
            raise ValueError(f"max_attempts must be from 1 to 1,000,000, got {value}")
        return value
    if name in ("backoff_base", "backoff_cap", "lease"):
        return _seconds(name, value, zero_ok=False)
    if name == "timeout":
        return _seconds(name, value, zero_ok=True)
    if name == "retry_on":
        return _retry_on(value)
    if name == "unique":
        if not isinstance(value, bool):
            raise TypeError(f"unique must be True or False, not {value!r}")
        return value
    raise TypeError(
        f"unknown task option {name!r}; the options are {', '.join(sorted(OPTION_NAMES))}"
    )


@dataclass(frozen=True)
class TaskOptions:
    """The options one attempt of a task runs with, every default filled in."""

    max_attempts: int
    backoff: Backoff
    retry_on: tuple[str, ...]
    #: Seconds the attempt may run, ``None`` for no limit.
    timeout: float | None
    lease: float
    unique: bool


def resolve_options(*layers: Mapping[str, Any], max_attempts: int, lease: float) -> TaskOptions:
    """Merge option layers, the first that sets a name winning, over the queue's values.

    ``layers`` hold normalised values (a payload's options are normalised here too); a
    value that does not parse raises ``ValueError`` naming the option.
    """
    chosen: dict[str, Any] = {}
    for layer in layers:
        for name, value in layer.items():
            if name not in chosen and value is not None:
                chosen[name] = normalize_option(name, value)
    base = chosen.get("backoff_base", Backoff.base)
    cap = max(chosen.get("backoff_cap", Backoff.cap), base)
    timeout = chosen.get("timeout")
    return TaskOptions(
        max_attempts=chosen.get("max_attempts", max_attempts),
        backoff=Backoff(base=base, cap=cap),
        retry_on=tuple(chosen.get("retry_on", DEFAULT_RETRY_ON)),
        timeout=timeout or None,
        lease=chosen.get("lease", lease),
        unique=chosen.get("unique", False),
    )


def retries(options: TaskOptions, exc: BaseException) -> bool:
    """Say whether ``exc`` is one of the exceptions ``options`` retry (by class path)."""
    wanted = options.retry_on
    return any(exception_path(kind) in wanted for kind in type(exc).__mro__)


def backend_option_problem(name: str, value: Any) -> str | None:
    """Say what is wrong with one ``TASKS[alias]['OPTIONS']`` entry, or ``None``."""
    if name not in BACKEND_OPTION_DEFAULTS:
        return f"unknown option {name!r}; known: {', '.join(sorted(BACKEND_OPTION_DEFAULTS))}"
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 512 * 2**20:
        return f"MAX_RESULT_BYTES must be an int from 1 to 536,870,912, got {value!r}"
    return None
