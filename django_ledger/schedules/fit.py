"""Does a schedule fit what will run it: its task, the task's arguments, the queue's limit.

Checked once the schedule's own settings pass (E073 to E079), so that a schedule the
checks pass is one whose every fire can run, not one retried as a ``TypeError`` or
refused at each fire:

- E090: ``TASK`` is not what the queue's worker runs. A queue without a ``HANDLER``
  runs Django tasks only, found by their module path (``os.system`` is no task); a raw
  queue's ``HANDLER`` reads the path as data, so any callable will do there.
- E091: ``ARGS`` and ``KWARGS`` do not bind to the task function's parameters.
- E092: the payload of a fire is over the queue's ``MAX_PAYLOAD_BYTES``.
- E093: ``QUEUE`` is not one of the task's declared queues (its ``queue_name`` and any
  ``queues=[...]``): the queue's worker would refuse every fire (``TaskRefused``).
"""

from __future__ import annotations

import inspect
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from django.utils.translation import gettext, gettext_lazy

from ..core.jobs import encode_task
from ..defaults import DEFAULTS
from ..tasks.options import declared_queues
from .problem import Problem, where

__all__ = ["fit_problems", "imported"]

_NO_TASK_HINT = gettext_lazy(
    "Give the dotted path of a task (a module-level function decorated with @task), or "
    "give the schedule's queue a raw HANDLER that reads the payload itself."
)


def imported(path: str) -> tuple[Any, str | None]:
    """Return what ``path`` names, or ``None`` and why it does not import.

    Anything a module raises at import is an answer here, not an exception: a check
    reports, it never raises (``manage.py`` runs every check before every command).
    """
    try:
        return import_string(path), None
    except ImportError as exc:
        return None, str(exc)
    except (Exception, SystemExit) as exc:  # a module's own error at import: report it
        return None, f"{type(exc).__name__}: {exc}"


def fit_problems(
    key: str,
    config: dict[str, Any],
    queue: str,
    overrides: dict[str, Any],
    defaults: dict[str, Any] | None,
) -> list[Problem]:
    """Return what keeps schedule ``key`` (its settings checked) from running on ``queue``."""
    path: str = config["TASK"]
    target, _ = imported(path)
    if "HANDLER" in overrides:
        if callable(target):
            return []
        return [
            Problem(
                90,
                gettext(
                    "%(path)r is not callable (%(kind)s), and queue %(queue)r's HANDLER is given "
                    "the path of a callable."
                )
                % {"path": path, "kind": _kind(target), "queue": queue},
                gettext("Name the function the handler is to run."),
                where(key, "TASK"),
            )
        ]
    task, why = _task_of(target, path)
    if task is None:
        return [Problem(90, f"{why}.", str(_NO_TASK_HINT), where(key, "TASK"))]
    return (
        _argument_problems(key, config, task)
        or _size_problems(key, config, queue, overrides, defaults)
        or _queue_problems(key, task, queue)
    )


def _queue_problems(key: str, task: Any, queue: str) -> list[Problem]:
    allowed = declared_queues(task)
    if queue in allowed:
        return []
    shown = ", ".join(map(repr, allowed))
    return [
        Problem(
            93,
            gettext(
                "QUEUE %(queue)r is not a queue %(module_path)s is declared for (%(shown)s): a "
                "worker of %(queue)r would refuse every fire (TaskRefused) and fail it unrun."
            )
            % {"queue": queue, "module_path": task.module_path, "shown": shown},
            gettext(
                "Drop QUEUE to use the task's own queue, name one of %(shown)s, or declare the "
                "task for it: @task(queue_name=%(queue)r), or with django_ledger.tasks.task, "
                "queues=[..., %(queue)r]."
            )
            % {"shown": shown, "queue": queue},
            where(key, "QUEUE"),
        )
    ]


def _task_of(target: Any, path: str) -> tuple[Any, str]:
    try:
        from ..tasks.compat import Task
    except ImproperlyConfigured as exc:
        return None, f"{path!r} cannot run on a queue without a HANDLER: {exc}"
    if not isinstance(target, Task):
        return None, f"{path!r} is not a task (a function decorated with @task): {_kind(target)}"
    if target.module_path != path:
        return None, (
            f"{path!r} is the task {target.module_path!r} under another name: a worker "
            "finds a task by its own module path only"
        )
    return target, ""


def _kind(target: Any) -> str:
    if inspect.ismodule(target):
        return "it is a module"
    if inspect.isclass(target):
        return f"it is the class {target.__qualname__}"
    if callable(target):
        return f"it is the {type(target).__name__} {getattr(target, '__qualname__', target)!r}"
    return f"it is a {type(target).__name__}"


def _argument_problems(key: str, config: dict[str, Any], task: Any) -> list[Problem]:
    try:
        signature = inspect.signature(task.func)
    except (TypeError, ValueError):
        return []  # nothing to bind against: the first fire says
    args = list(config["ARGS"])
    if task.takes_context:
        args.insert(0, None)  # the worker passes the context first
    try:
        signature.bind(*args, **config["KWARGS"])
    except TypeError as exc:
        return [
            Problem(
                91,
                gettext("ARGS and KWARGS do not fit %(module_path)s(%(names)s): %(exc)s.")
                % {
                    "module_path": task.module_path,
                    "names": ", ".join(signature.parameters),
                    "exc": exc,
                },
                gettext(
                    "Give the arguments the task function takes: every fire would fail with this "
                    "TypeError."
                ),
                where(key),
            )
        ]
    return []


def _size_problems(
    key: str,
    config: dict[str, Any],
    queue: str,
    overrides: dict[str, Any],
    defaults: dict[str, Any] | None,
) -> list[Problem]:
    limit = overrides.get("MAX_PAYLOAD_BYTES", (defaults or DEFAULTS).get("MAX_PAYLOAD_BYTES"))
    if isinstance(limit, bool) or not isinstance(limit, int):
        return []  # E030 reports a limit that is not a number
    size = len(encode_task(config["TASK"], list(config["ARGS"]), dict(config["KWARGS"])).encode())
    if size <= limit:
        return []
    return [
        Problem(
            92,
            gettext(
                "A fire's payload is at least %(size)s bytes, over the MAX_PAYLOAD_BYTES "
                "(%(limit)s) of queue %(queue)r: every fire would be REJECTED."
            )
            % {"size": f"{size:,}", "limit": f"{limit:,}", "queue": queue},
            gettext(
                "Pass less in ARGS and KWARGS (an id to look the data up by, say), or raise "
                "the queue's MAX_PAYLOAD_BYTES."
            ),
            where(key, "ARGS"),
        )
    ]
