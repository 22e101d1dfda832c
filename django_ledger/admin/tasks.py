"""Tasks in the admin: a record page's task section, and the records list's task filter.

Needs no task framework: it reads the payload and result documents (``tasks.state``)
and the task paths this process declared (``tasks.registry``). A payload meant as a
task document that does not decode (not JSON, nested too deep to read, not the
version this reads) is shown as undecodable, never as an error page.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.utils.module_loading import autodiscover_modules
from django.utils.translation import gettext, gettext_lazy

from ..core.errors import CorruptRecord
from ..core.jobs import BadPayload, TaskPayload, decode_task
from ..core.records import Record, decode_record
from ..core.sharded import AnyLedger
from ..tasks.registry import declared_paths
from ..tasks.state import TaskState, task_state
from .display import Label, instant_text
from .filters import ChoiceFilter
from .lookups import join_key
from .progress import progress_section

__all__ = ["MAX_TASK_MATCHES", "TaskFilter", "read_task", "task_section"]

#: Most records the task filter selects (it reads every record of the queues shown).
MAX_TASK_MATCHES = 10_000
_discovered = False


def read_task(payload: str) -> tuple[TaskPayload | None, str]:
    """Decode a task payload: the task and ``""``, or ``None`` and why it does not decode.

    The reason is ``""`` for a payload not meant as a task document (one that is not a
    JSON object naming a ``"task"``): a queue may hold plain payloads.
    """
    try:
        return decode_task(payload), ""
    except RecursionError:
        reason = gettext("the payload is nested too deep to read")
    except (BadPayload, ValueError, TypeError) as exc:
        reason = str(exc)
    if not payload.lstrip().startswith("{") or '"task"' not in payload:
        return None, ""
    return None, gettext("does not decode as a task document: %(reason)s") % {"reason": reason}


def task_section(ledger: AnyLedger, record: Record) -> dict[str, Any] | None:
    """What the record page shows of a task, or ``None`` when the payload is not one."""
    if read_task(record.payload)[0] is None:
        return None
    raw_result = ledger.results([record.request_id])[0]
    shard = ledger.shard_for(record.request_id)
    with shard.translate_errors():
        raw_progress = shard.redis.hget(shard.runner.keys.progress, record.request_id)
    try:
        state = task_state(ledger.queue, record, raw_result, raw_progress)
    except (RecursionError, ValueError):
        return None  # a result document too deep to read: the payload is still shown
    if state.payload is None:
        return None
    return {
        "name": state.payload.task.rpartition(".")[2],
        "path": state.payload.task,
        "status": state.status,
        "args": _pretty(state.payload.args),
        "kwargs": _pretty(state.payload.kwargs),
        "options": _pretty(state.payload.options) if state.payload.options else "",
        "times": [
            (Label.of(gettext_lazy("Enqueued at")), instant_text(state.enqueued_at)),
            (Label.of(gettext_lazy("Started at")), instant_text(state.started_at)),
            (Label.of(gettext_lazy("Last attempted at")), instant_text(state.last_attempted_at)),
            (Label.of(gettext_lazy("Finished at")), instant_text(state.finished_at)),
        ],
        "attempts": _attempts(state),
        "has_return_value": state.has_return_value,
        "return_value": _pretty(state.return_value) if state.has_return_value else "",
        "result_problem": state.result_problem or "",
        "progress": progress_section(state.progress, record),
    }


def _attempts(state: TaskState) -> list[dict[str, Any]]:
    rows = []
    for number, attempt in enumerate(state.attempts, 1):
        error = attempt.error or {}
        traceback = str(error.get("traceback", ""))
        rows.append(
            {
                "number": number,
                "worker_id": attempt.worker_id,
                "started_at": instant_text(attempt.started_at or None),
                "finished_at": instant_text(attempt.finished_at),
                "error_class": str(error.get("exception_class_path", "")),
                "error_line": _message(traceback, str(error.get("exception_class_path", ""))),
                "traceback": traceback,
            }
        )
    if state.record.state.name == "CLAIMED":
        rows.append(
            {
                "number": len(rows) + 1,
                "worker_id": state.record.owner,
                "started_at": instant_text(state.record.updated_at),
                "finished_at": gettext("running"),
                "error_class": "",
                "error_line": "",
                "traceback": "",
            }
        )
    return rows


def attempt_limit(ledger: AnyLedger, record: Record) -> int:
    """The most attempts a worker gives this record: its task's ``max_attempts``.

    A record that is no task, or whose task this process cannot find, has its queue's.
    """
    if read_task(record.payload)[0] is None:
        return ledger.max_attempts
    from ..tasks.handler import task_options

    try:
        return task_options(ledger.queue, record.payload).max_attempts
    except Exception:  # unknown here, refused by a worker: the queue's bound holds
        return ledger.max_attempts


def _message(traceback: str, error_class: str) -> str:
    """The error's message: the traceback's last line without the class it starts with.

    Python ends a traceback with ``ValueError: message`` (or the class alone); the page
    names the class beside it already.
    """
    line = traceback.rstrip("\n").rpartition("\n")[2]
    short = error_class.rpartition(".")[2]
    head, colon, rest = line.partition(":")
    if short and head.strip().rpartition(".")[2] == short and (colon or not rest):
        return rest.strip()
    return line


def _pretty(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except RecursionError:
        # Indenting recurses in Python, deeper than decoding did: show it on one line.
        return json.dumps(value, ensure_ascii=False, sort_keys=True)


class TaskFilter(ChoiceFilter):
    """The records of one task (by its path): declared tasks are the choices.

    It reads every record of the queues the list shows (a payload is not indexed), and
    selects at most ``MAX_TASK_MATCHES``: narrow by queue first on a large ledger.
    """

    title = gettext_lazy("task")
    parameter_name = "task"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        global _discovered
        if not _discovered:
            _discovered = True
            # Each app's tasks module declares its tasks; without a task framework, none.
            with contextlib.suppress(ImportError, ImproperlyConfigured):
                autodiscover_modules("tasks")
        return [(path, path.rpartition(".")[2] + f" ({path})") for path in declared_paths()]

    def refusal(self, value: str) -> str:
        return gettext("no task %(task)r to show") % {"task": value}

    def narrow(self, queryset: Any, value: str) -> Any:
        keys, notes = matching_keys(queryset, value)
        return queryset.filter(key__in=keys).noting(notes)


def matching_keys(queryset: Any, path: str) -> tuple[list[str], dict[str, str]]:
    """Return the keys of the records of task ``path`` in the queues of ``queryset``.

    A record whose payload names the task but does not decode is one of them too: the
    second value is why, by key (the list shows such a row as undecodable).
    """
    needle = json.dumps({"task": path}, ensure_ascii=False)[1:-1].replace(": ", ":").encode()
    keys: list[str] = []
    notes: dict[str, str] = {}
    for queue in queryset.spec.queues:
        ledger = queryset.ledger(queue)
        for shard in ledger.shards:  # a sharded queue's records: every shard's
            with ledger.translate_errors():
                for raw_id, raw in shard.redis.hscan_iter(shard.records_key, count=1000):
                    if needle not in raw:
                        continue
                    request_id = raw_id.decode("utf-8", "replace")
                    try:
                        record = decode_record(request_id, raw)
                    except CorruptRecord:
                        continue  # corrupt: the quarantine's business
                    task, problem = read_task(record.payload)
                    key = join_key(queue, request_id)
                    if problem:
                        notes[key] = gettext("payload %(problem)s") % {"problem": problem}
                    elif task is None or task.task != path:
                        continue
                    keys.append(key)
                    if len(keys) >= MAX_TASK_MATCHES:
                        return keys, notes
    return keys, notes
