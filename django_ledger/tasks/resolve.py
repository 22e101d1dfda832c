"""From a payload's task path to a task, without running anything a payload names.

A payload is data from anyone who may enqueue (the REST API included), so its path is
only ever looked up, never called: it must name a ``Task`` object (made by ``@task``)
by its module path, in a module already imported or in an installed app's package.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import sys
import threading
import time
from typing import Any

from django.apps import apps

from .compat import InvalidTask, Task
from .exceptions import UnknownTask

__all__ = ["declared_task", "random_id", "resolve_task", "unique_id"]

_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def resolve_task(path: str) -> Task[..., Any]:
    """Return the task ``path`` names, or raise ``UnknownTask`` saying why not."""
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise UnknownTask(f"{path!r} is not the dotted path of a task")
    module_name, _, name = path.rpartition(".")
    if module_name not in sys.modules and apps.get_containing_app_config(module_name) is None:
        raise UnknownTask(
            f"{path!r} is not in an installed app's package, nor already imported: "
            "the worker imports task modules of INSTALLED_APPS only"
        )
    try:
        # Also for a module in sys.modules: one another thread is still importing is
        # waited for here, where a look in sys.modules would find it half made.
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownTask(f"{path!r} does not import: {exc}") from exc
    found: object = vars(module).get(name)
    if not isinstance(found, Task) or found.module_path != path:
        raise UnknownTask(f"{path!r} is not a task (a function decorated with @task)")
    return found


def declared_task(task: Task[..., Any]) -> Task[..., Any]:
    """Return the module-level task ``task`` was made from (a worker finds that one).

    Raise ``InvalidTask`` if the task's module path leads elsewhere, as for a task
    bound to a name other than its function's: a worker could never find it.
    """
    module = sys.modules.get(task.func.__module__)
    found: object = None if module is None else vars(module).get(task.func.__qualname__)
    if found is task:
        return task
    if not isinstance(found, Task) or found.func is not task.func:
        raise InvalidTask(
            f"{task.module_path!r} does not name this task, so no worker could find it: "
            "decorate the function where it is defined (@task), under its own name"
        )
    return found


_ID_LOCK = threading.Lock()
_last_id = [0, 0]  # the last id's millisecond and its sequence within that millisecond
#: Random tails (16 hex digits each) drawn from os.urandom 256 at a time: one system call
#: per 256 ids. A forked child drops its parent's, or both would hand out the same ones.
_tails: list[str] = []
_TAILS_PER_DRAW = 256
os.register_at_fork(after_in_child=_tails.clear)


def random_id() -> str:
    """Return a new task id: 32 lowercase hex digits that sort in enqueue order.

    Like a UUIDv7: 12 digits of epoch milliseconds, 4 of a sequence within the
    millisecond, then 16 random ones. The ledger orders tasks of one priority due in one
    millisecond by id, so within a process generated ids keep them first in, first out;
    a clock that steps back never makes an id sort before an earlier one.
    """
    with _ID_LOCK:
        ms = max(time.time_ns() // 1_000_000, _last_id[0])
        sequence = _last_id[1] + 1 if ms == _last_id[0] else 0
        if sequence > 0xFFFF:
            ms, sequence = ms + 1, 0
        _last_id[0], _last_id[1] = ms, sequence
        if not _tails:
            drawn = os.urandom(8 * _TAILS_PER_DRAW).hex()
            _tails.extend(drawn[i : i + 16] for i in range(0, len(drawn), 16))
        tail = _tails.pop()
    return f"{ms:012x}{sequence:04x}{tail}"


def unique_id(path: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    """Return the id of a unique task's call: a digest of the task and its arguments."""
    canonical = json.dumps(
        [path, args, kwargs], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return "unique:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
