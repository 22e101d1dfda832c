"""``LedgerTask``: Django's ``Task`` with the ledger's options, and its context.

``LedgerBackend.task_class`` is ``LedgerTask``, so on Django 6.1 (and with the
backport) ``@task(max_attempts=5, timeout=30)`` reaches it. ``django_ledger.tasks.task``
is the same decorator with the same keywords on every version (Django 6.0's ``@task``
passes none through), and ``.using(...)`` takes them too, for one call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    Literal,
    ParamSpec,
    TypeAlias,
    TypeVar,
    overload,
)

from ..core.worker.handler import Job
from .compat import (
    DEFAULT_TASK_BACKEND_ALIAS,
    DEFAULT_TASK_PRIORITY,
    DEFAULT_TASK_QUEUE_NAME,
    Task,
    TaskContext,
    task_backends,
)
from .exceptions import Cancelled
from .options import OPTION_NAMES, normalize_option, normalize_queues
from .progress import ProgressReporting, Reports
from .registry import declare

__all__ = ["LedgerTask", "LedgerTaskContext", "task"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

if TYPE_CHECKING:
    _TaskBase = Task
    _ContextBase: TypeAlias = TaskContext[..., Any]
else:
    _ContextBase = TaskContext

    class _TaskBase(Task, Generic[_P, _R]):
        """Django's ``Task``, subscriptable on every version (Django 6.0's is not generic)."""

        __slots__ = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerTask(_TaskBase[_P, _R]):
    """A task with the ledger's options; ``None`` leaves an option to the queue."""

    #: Attempts before a raising task ends FAILED (claims, counting crashed attempts).
    max_attempts: int | None = None
    #: Retry backoff, exponential with full jitter: seconds of the first ceiling ...
    backoff_base: float | None = None
    #: ... and the most any retry waits.
    backoff_cap: float | None = None
    #: Exception classes (or dotted paths) that retry; any other fails at once.
    retry_on: tuple[str, ...] | None = None
    #: Seconds one attempt may run (0: no limit).
    timeout: float | None = None
    #: Seconds of the claim's lease, renewed while the attempt runs.
    lease: float | None = None
    #: Admit each (task, arguments) once: ``True`` while its record is kept (the id is
    #: derived from them), ``"until_start"``, ``"until_end"``, or seconds from admission.
    unique: bool | str | float | None = None
    #: A unique call enqueued again while PENDING and never started runs this many
    #: seconds after the latest enqueue ...
    debounce: float | None = None
    #: ... but at most this many after the first (default: 10 times ``debounce``).
    debounce_max: float | None = None
    #: The queues besides ``queue_name`` the task may run from (``None``: its own only).
    #: Declared only: it never travels in a payload.
    queues: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in OPTION_NAMES:
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, normalize_option(name, value))
        if self.queues is not None:
            object.__setattr__(self, "queues", normalize_queues(self.queues))
        Task.__post_init__(self)
        declare(self.module_path)

    @property
    def ledger_options(self) -> dict[str, Any]:
        """The options this task sets, as a payload carries them."""
        return {
            name: list(value) if name == "retry_on" else value
            for name in OPTION_NAMES
            if (value := getattr(self, name)) is not None
        }

    def using(
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: datetime | timedelta | None = None,
        backend: str | None = None,
        **options: Any,
    ) -> LedgerTask[_P, _R]:
        """Return a copy with other defaults, and other ledger options (``timeout=``...)."""
        unknown = sorted(set(options) - OPTION_NAMES)
        if unknown:
            raise TypeError(f"using() got unknown option(s): {', '.join(unknown)}")
        changes = dict(
            options, priority=priority, queue_name=queue_name, run_after=run_after, backend=backend
        )
        return replace(self, **{name: v for name, v in changes.items() if v is not None})


# django-stubs declares TaskContext unfrozen; Django's own is frozen, as this is.
@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerTaskContext(ProgressReporting, _ContextBase):  # type: ignore[misc]
    """What a ``takes_context`` task gets: its result so far, the attempt and the fence.

    Hand ``fence`` to downstream systems with each write: it grows with every claim of
    this task, so a system that keeps the highest fence it saw can refuse the writes of
    an attempt that lost its claim.
    """

    fence: int
    max_attempts: int
    #: The worker's job this attempt runs (``None`` outside a worker): what it heard.
    job: Job | None = field(default=None, repr=False, compare=False)
    #: Where ``set_progress`` and ``metadata`` go (tasks/progress.py).
    reports: Reports | None = field(default=None, repr=False, compare=False)

    @property
    def is_last_attempt(self) -> bool:
        """True when a raise now ends the task FAILED instead of retrying it."""
        attempt: int = self.attempt
        return attempt >= self.max_attempts

    @property
    def cancelled(self) -> bool:
        """True once the worker heard that this task was cancelled (``cancel``): stop now."""
        return self.job is not None and self.job.cancel is not None

    def check_cancelled(self) -> None:
        """Raise ``Cancelled`` if this task was cancelled; settle nothing after it.

        The task has ended FAILED already, with who cancelled it: whatever this attempt
        would store now is refused by its fence.
        """
        notice = None if self.job is None else self.job.cancel
        if notice is None:
            return
        at = datetime.fromtimestamp(notice.at / 1000, tz=UTC)
        text = f"cancelled by {notice.by} at {at.isoformat(timespec='milliseconds')}"
        if notice.reason:
            text += f": {notice.reason}"
        raise Cancelled(text, by=notice.by, at=notice.at, reason=notice.reason)


@overload
def task(
    function: Callable[Concatenate[Any, _P], _R],
    /,
    *,
    priority: int = ...,
    queue_name: str = ...,
    backend: str = ...,
    takes_context: Literal[True],
    **options: Any,
) -> LedgerTask[_P, _R]: ...
@overload
def task(
    function: Callable[_P, _R],
    /,
    *,
    priority: int = ...,
    queue_name: str = ...,
    backend: str = ...,
    takes_context: Literal[False] = ...,
    **options: Any,
) -> LedgerTask[_P, _R]: ...
@overload
def task(
    *,
    priority: int = ...,
    queue_name: str = ...,
    backend: str = ...,
    takes_context: Literal[True],
    **options: Any,
) -> Callable[[Callable[Concatenate[Any, _P], _R]], LedgerTask[_P, _R]]: ...
@overload
def task(
    *,
    priority: int = ...,
    queue_name: str = ...,
    backend: str = ...,
    takes_context: Literal[False] = ...,
    **options: Any,
) -> Callable[[Callable[_P, _R]], LedgerTask[_P, _R]]: ...
def task(
    function: Callable[..., Any] | None = None,
    /,
    *,
    priority: int = DEFAULT_TASK_PRIORITY,
    queue_name: str = DEFAULT_TASK_QUEUE_NAME,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    **options: Any,
) -> LedgerTask[Any, Any] | Callable[[Callable[..., Any]], LedgerTask[Any, Any]]:
    """Declare a task, as Django's ``@task``, with the ledger's options on any version.

    ``@task(max_attempts=5, retry_on=[ConnectionError], timeout=30)``. The task is the
    backend's ``task_class`` if that is a ``LedgerTask``, else a ``LedgerTask`` (whose
    options another backend ignores). It keeps the function's parameter and return
    types for type checkers: ``send.enqueue(1)`` is checked against ``send(user_id: int)``
    (a ``takes_context`` function's first parameter, the context, left out).
    """
    if "run_after" in options:
        raise TypeError(
            "run_after cannot be defined statically with the @task decorator. "
            "Use .using(run_after=...) to set it dynamically."
        )
    unknown = sorted(set(options) - OPTION_NAMES - {"queues"})
    if unknown:
        raise TypeError(f"task() got unknown option(s): {', '.join(unknown)}")

    def wrapper(func: Callable[..., Any]) -> LedgerTask[Any, Any]:
        kind = getattr(task_backends[backend], "task_class", LedgerTask)
        if not (isinstance(kind, type) and issubclass(kind, LedgerTask)):
            kind = LedgerTask
        made: LedgerTask[Any, Any] = kind(
            func=func,
            priority=priority,
            queue_name=queue_name,
            backend=backend,
            takes_context=takes_context,
            run_after=None,
            **options,
        )
        return made

    if function is not None:
        return wrapper(function)
    return wrapper
