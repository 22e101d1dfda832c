"""The options Django's task API leaves out: attempts, backoff, retries, time limits, unique.

Each option can be set per task (``@task(max_attempts=5)`` on Django 6.1, or
``django_ledger.tasks.task`` anywhere), per queue (``LEDGER['QUEUES'][name]``, upper
case: ``MAX_ATTEMPTS``, ``BACKOFF_BASE``, ...), and in a payload (``"options"``: a
call's ``.using(max_attempts=5)``, or another language's). The task's declaration wins
over the queue's, then the built-in default: those are the limits. A payload comes from
whoever may enqueue, so it may only tighten them (``tighten``): fewer attempts, a
shorter time-out or lease, retries no sooner and of fewer exceptions; anything else
refuses the run (``TaskRefused``). Values are normalised once, when a task is declared,
into what a JSON payload holds: seconds as numbers, exception classes as dotted paths.

A task runs only from its own queue (``queue_name``) and from those it declares with
``queues=[...]`` (``check_queue``): a payload admitted into one queue cannot make its
worker run a task meant for another.
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
    "PAYLOAD_BACKOFF_MOST",
    "TaskOptions",
    "TaskRefused",
    "backend_option_problem",
    "check_queue",
    "declared_queues",
    "exception_path",
    "normalize_option",
    "normalize_queues",
    "resolve_options",
    "retries",
    "tighten",
]

#: Exceptions that retry unless a task or queue says otherwise: any ``Exception`` (not
#: ``SystemExit`` or ``KeyboardInterrupt``).
DEFAULT_RETRY_ON: tuple[str, ...] = ("builtins.Exception",)
#: ``TASKS[alias]['OPTIONS']`` of a ``LedgerBackend``, and their defaults.
BACKEND_OPTION_DEFAULTS: dict[str, Any] = {
    # The most UTF-8 bytes a task's JSON return value may take; past it the attempt
    # fails with ResultTooLarge. At most the smallest MAX_PAYLOAD_BYTES of its queues.
    "MAX_RESULT_BYTES": 65_536,
    # Run each enqueue at once, in the enqueuing process, through the ledger (tests only:
    # docs/testing.md). Ids, uniqueness, enqueue_once and workflows keep their meaning.
    "EAGER": False,
}

#: The longest backoff (``backoff_base``, ``backoff_cap``) a payload may ask for, in
#: seconds, unless the task or queue declares a longer one: one day.
PAYLOAD_BACKOFF_MOST = 86_400.0

_MAX_SECONDS = MAX_DURATION_MS / 1000


class TaskRefused(ValueError):
    """A worker refused to run a payload: a task of another queue, or options that loosen.

    Recorded as the error of the attempt, which ends FAILED without running anything.
    (Defined here, not with the task exceptions: this module imports with no task
    framework installed, for the system checks.)
    """


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


#: ``unique``'s words for how long one record holds a call (``core/unique.py``).
UNIQUE_UNTIL = ("until_start", "until_end")


def _unique(value: Any) -> bool | str | float:
    """``unique``: True (while the record is kept), False, a word of ``UNIQUE_UNTIL``, or a
    period (seconds or a ``timedelta``) from the admission."""
    if isinstance(value, bool) or value in UNIQUE_UNTIL:
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        raise ValueError(
            f"unique must be True, False, 'until_start', 'until_end' or a period, not {value!r}"
        )
    if not isinstance(value, timedelta | int | float):
        raise TypeError(
            "unique must be True, False, 'until_start', 'until_end' or a period (seconds or "
            f"a timedelta), not {value!r}"
        )
    return _seconds("unique", value, zero_ok=False)


def normalize_option(name: str, value: Any) -> Any:
    """Check one option and return it as a payload holds it; raise TypeError/ValueError."""
    if name == "max_attempts":
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"max_attempts must be an int, not {value!r}")
        if not 1 <= value <= 1_000_000:
            raise ValueError(f"max_attempts must be from 1 to 1,000,000, got {value}")
        return value
    if name in ("backoff_base", "backoff_cap", "lease", "debounce", "debounce_max"):
        return _seconds(name, value, zero_ok=False)
    if name == "timeout":
        return _seconds(name, value, zero_ok=True)
    if name == "retry_on":
        return _retry_on(value)
    if name == "unique":
        return _unique(value)
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
    unique: bool | str | float
    #: Seconds a repeat of a unique call held PENDING moves it to, and the most from its
    #: admission (``None``: no debounce). Used when enqueuing only.
    debounce: float | None = None
    debounce_max: float | None = None


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
    return TaskOptions(
        max_attempts=chosen.get("max_attempts", max_attempts),
        backoff=Backoff(base=base, cap=cap),
        retry_on=tuple(chosen.get("retry_on", DEFAULT_RETRY_ON)),
        timeout=chosen.get("timeout") or None,
        lease=chosen.get("lease", lease),
        unique=chosen.get("unique", False),
        debounce=chosen.get("debounce"),
        debounce_max=chosen.get("debounce_max"),
    )


def retries(options: TaskOptions, exc: BaseException) -> bool:
    """Say whether ``exc`` is one of the exceptions ``options`` retry (by class path)."""
    return any(exception_path(kind) in options.retry_on for kind in type(exc).__mro__)


def backend_option_problem(name: str, value: Any) -> str | None:
    """Say what is wrong with one ``TASKS[alias]['OPTIONS']`` entry, or ``None``."""
    if name not in BACKEND_OPTION_DEFAULTS:
        return f"unknown option {name!r}; known: {', '.join(sorted(BACKEND_OPTION_DEFAULTS))}"
    if name == "EAGER":
        return None if isinstance(value, bool) else f"EAGER must be True or False, got {value!r}"
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 512 * 2**20:
        return f"MAX_RESULT_BYTES must be an int from 1 to 536,870,912, got {value!r}"
    return None


def normalize_queues(value: Any) -> tuple[str, ...]:
    """Check a task's ``queues`` declaration (queue names) and return it as a tuple."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"queues must be a list of queue names, not {value!r}")
    names = tuple(value)
    if not names or not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"queues must be a non-empty list of queue names, got {value!r}")
    return tuple(dict.fromkeys(names))


def declared_queues(task: Any) -> tuple[str, ...]:
    """The queues ``task`` may run from: its ``queue_name``, then its declared ``queues``."""
    extra = getattr(task, "queues", None) or ()
    return tuple(dict.fromkeys((task.queue_name, *extra)))


def check_queue(task: Any, queue: str) -> None:
    """Raise ``TaskRefused`` unless ``task`` is declared for ``queue``."""
    allowed = declared_queues(task)
    if queue not in allowed:
        shown = ", ".join(repr(name) for name in allowed)
        raise TaskRefused(
            f"{task.module_path!r} is declared for queue(s) {shown}, not {queue!r}: a worker "
            f"of {queue!r} does not run it (a task meant for several queues declares them: "
            "@task(queues=[...]))"
        )


def _refuse(name: str, value: Any, limit: str) -> TaskRefused:
    return TaskRefused(
        f"the payload's option {name}={value!r} loosens what the task and its queue allow "
        f"({limit}): a payload may only tighten them"
    )


def _narrower(path: str, allowed: tuple[str, ...]) -> bool:
    """Whether retrying ``path`` stays within ``allowed`` (built-ins: by subclass)."""
    if path in allowed:
        return True
    module, _, name = path.rpartition(".")
    kind = getattr(builtins, name, None) if module == "builtins" else None
    if not (isinstance(kind, type) and issubclass(kind, BaseException)):
        return False
    return any(exception_path(base) in allowed for base in kind.__mro__)


def tighten(limits: TaskOptions, payload: Mapping[str, Any]) -> TaskOptions:
    """Apply a payload's options to the declared and queue ``limits``, only to tighten them.

    Raise ``TaskRefused`` for one that loosens a limit (more attempts, a longer or no
    time-out, a longer lease, sooner retries, retries of other exceptions, a backoff
    past ``PAYLOAD_BACKOFF_MOST``), ``ValueError``/``TypeError`` for one that does not parse.
    """
    chosen = {name: normalize_option(name, v) for name, v in payload.items() if v is not None}
    # The payload's values, each checked below against its limit (the backoff's apart).
    options = {**vars(limits), **chosen}
    attempts = chosen.get("max_attempts")
    if attempts is not None and attempts > limits.max_attempts:
        raise _refuse("max_attempts", attempts, f"at most {limits.max_attempts}")
    if "timeout" in chosen:
        timeout = options["timeout"] = chosen["timeout"] or None
        if limits.timeout is not None and (timeout is None or timeout > limits.timeout):
            raise _refuse(
                "timeout", chosen["timeout"], f"more than 0, at most {limits.timeout:g} s"
            )
    lease = chosen.get("lease")
    if lease is not None and lease > limits.lease:
        raise _refuse("lease", lease, f"at most {limits.lease:g} s")
    base, cap = limits.backoff.base, limits.backoff.cap
    for name, least in (("backoff_base", base), ("backoff_cap", cap)):
        value = options.pop(name, None)
        if value is None:
            continue
        most = max(least, PAYLOAD_BACKOFF_MOST)
        if not least <= value <= most:
            raise _refuse(name, value, f"from {least:g} s to {most:g} s")
        base, cap = (value, cap) if name == "backoff_base" else (base, value)
    options["backoff"] = Backoff(base=base, cap=max(cap, base))
    retry_on = chosen.get("retry_on")
    if retry_on is not None and not all(_narrower(path, limits.retry_on) for path in retry_on):
        raise _refuse("retry_on", list(retry_on), f"within {list(limits.retry_on)}")
    return TaskOptions(**options)
