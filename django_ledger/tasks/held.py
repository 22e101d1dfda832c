"""Enqueue a call of a task ``unique`` until its start, its end or for a period, or debounced.

Such a call is admitted by ``core/unique.py`` (one script call): while a record holds
the call, an enqueue answers that record's ``TaskResult`` (its id, not a new one); once
it no longer holds it, an enqueue admits a new record under a new id. ``unique=True``
without ``debounce`` never comes here: its id is the call's own, and the ordinary
admission refuses a second record (``plans.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from ..core.errors import FusedPathOnly, LedgerUnavailable
from ..core.ledger import Ledger
from ..core.results import Admission
from ..core.timing import MAX_DURATION_MS, duration_ms
from ..core.unique import Debounce, UniqueMode, UniqueNotHere, admit_unique
from ..queues import QueueEntry
from .admission import answered, retried
from .compat import InvalidTask, Task, TaskResult
from .resolve import unique_id

__all__ = ["Held", "enqueue_held", "held_of", "not_staged"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
#: ``debounce_max`` when a task sets none: ten times its ``debounce``.
DEBOUNCE_MAX_FACTOR = 10
#: ``unique``'s words, and the mode each holds a record in.
_UNTIL = {"until_start": UniqueMode.START, "until_end": UniqueMode.END}


@dataclass(frozen=True, slots=True)
class Held:
    """How long one record holds a call, and its debounce."""

    mode: UniqueMode
    period_ms: int = 0
    debounce: Debounce | None = None


def held_of(
    path: str, unique: bool | str | float, debounce: float | None, most: float | None
) -> Held | None:
    """The ``Held`` of a task's options, ``None`` for the ordinary admission."""
    if debounce is None and most is not None:
        raise InvalidTask(f"{path} sets debounce_max without debounce")
    if debounce is not None and unique is False:
        raise InvalidTask(
            f"{path} sets debounce but is not unique: a debounce moves the record of the "
            "same call, so declare unique too (unique='until_start' is the usual choice)"
        )
    bounce = None
    if debounce is not None:
        delay_ms = duration_ms(debounce, "debounce", positive=True)
        if most is None:
            most = min(debounce * DEBOUNCE_MAX_FACTOR, MAX_DURATION_MS // 1000)
        most_ms = duration_ms(most, "debounce_max")
        if most_ms < delay_ms:
            raise InvalidTask(f"{path}: debounce_max ({most} s) is less than debounce")
        bounce = Debounce(delay_ms, most_ms)
    if unique is True:
        return Held(UniqueMode.RECORD, debounce=bounce) if bounce else None
    if unique in _UNTIL:
        return Held(_UNTIL[unique], debounce=bounce)
    if isinstance(unique, int | float) and not isinstance(unique, bool):
        return Held(UniqueMode.PERIOD, duration_ms(unique, "unique", positive=True), bounce)
    return None


def not_staged(path: str) -> InvalidTask:
    """The error of a held or debounced call enqueued inside ``transaction.atomic()``."""
    return InvalidTask(
        f"{path} is unique until its start, its end or for a period, or debounced: it "
        "cannot be enqueued inside transaction.atomic() (the outbox admits by id only); "
        "enqueue it from transaction.on_commit"
    )


def enqueue_held(
    sender: type,
    alias: str,
    task: Task[_P, _R],
    entry: QueueEntry,
    held: Held,
    result: TaskResult[_P, _R],
    payload: str,
    delay_ms: int,
    traceparent: str | None,
) -> TaskResult[_P, _R]:
    """Admit ``result``'s call unless a record holds it; answer the holder's result if one does."""
    ledger = entry.ledger
    path = task.module_path
    if not isinstance(ledger, Ledger):
        raise InvalidTask(
            f"{path} cannot be enqueued into {ledger.queue!r}: a queue of several SHARDS "
            "keeps unique calls only with unique=True and no debounce"
        )
    digest = "" if held.mode is UniqueMode.RECORD else unique_id(path, result.args, result.kwargs)

    def admit() -> Admission:
        return admit_unique(
            ledger,
            result.id,
            payload,
            mode=held.mode,
            digest=digest,
            period_ms=held.period_ms,
            debounce=held.debounce,
            delay_ms=delay_ms,
            traceparent=traceparent,
            priority=task.priority,
        )

    try:
        answer = admit()
    except (FusedPathOnly, UniqueNotHere) as exc:
        raise InvalidTask(f"{path} cannot be enqueued into {ledger.queue!r}: {exc}") from exc
    except LedgerUnavailable as exc:  # the same id again: a try that was applied holds it
        answer = retried(exc, ledger, path, [result.id], admit)
    own = held.mode is not UniqueMode.RECORD and answer.request_id == result.id
    return answered(sender, alias, task, entry, [result], [answer], own=own)[0]
