"""What a worker says about an outcome: counts, metrics, its log line, its trace.

One ``outcome=`` line per settlement, in one format for every outcome, so a log reader
can follow a request id through its attempts.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from ..counters import Tally
from ..records import State
from ..results import Settlement, SettlementStatus
from .handler import Backoff, Job, Outcome
from .state import Entry, WorkerState

__all__ = [
    "handler_bug",
    "log_outcome",
    "settled",
    "tell_ended",
    "tell_started",
    "trace_attributes",
]

log = logging.getLogger("django_ledger.worker")


def settled(
    state: WorkerState, items: list[tuple[Entry, Outcome]], answers: list[Settlement]
) -> None:
    """Count, measure and log the outcomes one call settled (one line each)."""
    with state.lock:
        for entry, _ in items:
            state.drop(entry)
    now = time.monotonic()
    counts, metered = state.counts, state.metered
    heartbeats = state.config.heartbeats
    told = state.config.on_outcome
    tally = heartbeats.tally if heartbeats is not None else None
    if tally is not None and not tally.enabled:
        tally = None  # counters off: not even the times are taken
    # The level's check is cached by the logger: a disabled line costs no formatting.
    info, warning = log.isEnabledFor(logging.INFO), log.isEnabledFor(logging.WARNING)
    ended = state.config.ended
    for (entry, outcome), answer in zip(items, answers, strict=True):
        outcome_state = outcome.state
        if outcome.settled is not None:  # a signal receiver's bug must not stop the main loop
            written = answer.status is not SettlementStatus.LOST
            call = partial(outcome.settled, written)
            _hook(state, entry, "after settling %s, its handler raised", call)
        if answer.status is SettlementStatus.LOST:
            counts.lost += 1
            word, shown = "lost", warning
            if metered:
                state.metrics.lost(entry.queue)
        elif outcome_state is State.COMPLETED:
            counts.processed += 1
            word, shown = "completed", info
        elif outcome_state is State.FAILED:
            counts.processed += 1
            counts.failed += 1
            word, shown = "failed", warning
        else:
            counts.retried += 1
            word, shown = "retry", info
        if ended is not None and (word == "completed" or word == "failed"):
            tell_ended(state, entry, ended, word == "completed")
        if told is not None:
            told(entry.queue, entry.job.claim, word)
        if not (shown or metered or tally is not None):
            continue
        seconds = None if entry.started is None else now - entry.started
        name = entry.plan.name if entry.plan is not None else ""
        if tally is not None:
            tallied(tally, entry, word, seconds, name, answer)
            if word == "failed" or word == "retry":
                kept_error(tally, entry, outcome, name, answer.reason)
        if metered:
            state.metrics.outcome(entry.queue, name, word, seconds)
        if shown:
            log_outcome(entry, outcome, word, seconds, name, answer.reason)


def tell_started(
    state: WorkerState, entry: Entry, started: Callable[[str, str, int], None]
) -> None:
    """Tell ``WorkerConfig.started`` of a run starting; its bug never stops the run."""
    claim = entry.job.claim
    call = partial(started, entry.queue, claim.request_id, claim.attempt)
    _hook(state, entry, "as %s started, its start hook raised", call)


def tell_ended(
    state: WorkerState, entry: Entry, ended: Callable[[str, str, bool], None], completed: bool
) -> None:
    """Tell ``WorkerConfig.ended`` of a run settled for good; its bug never stops the loop."""
    call = partial(ended, entry.queue, entry.job.claim.request_id, completed)
    _hook(state, entry, "after settling %s, its end hook raised", call)


def _hook(state: WorkerState, entry: Entry, what: str, call: Callable[[], None]) -> None:
    """Make ``call``; an exception it raises is logged (``what`` of the run), not raised."""
    try:
        call()
    except Exception:
        log.exception("worker %s: " + what, state.worker_id, entry.job.claim.request_id)


def tallied(
    tally: Tally,
    entry: Entry,
    word: str,
    seconds: float | None,
    name: str,
    answer: Settlement,
) -> None:
    """Add one settlement to the worker's counters (``core/counters.py``).

    Wait time (due to start) is known for the attempts that ended: their record keeps
    the due time they were claimed at (a retry's record is due again, later).
    """
    wait = None
    if word == "completed" or word == "failed":
        due_at = answer.due_at  # read from the bytes: no decode for a count
        if due_at is not None:
            wait = (entry.job.started_at - due_at) / 1000
    tally.add(entry.queue, name, word, seconds, wait)


def kept_error(tally: Tally, entry: Entry, outcome: Outcome, name: str, reason: str | None) -> None:
    """Keep the error of a failed or retried attempt as its task's last error.

    The class is the outcome's reason (an exception class path); the first line of the
    message is read from the attempt's result document when it holds a traceback (a
    Django task's), else it is empty (a raw handler's outcome has only the class).
    """
    error_class = outcome.reason or reason or ""
    if not error_class:
        return
    tally.error(
        entry.queue,
        name,
        error_class,
        _first_line(outcome.result, error_class),
        int(time.time() * 1000),
    )


def _first_line(result: str | None, error_class: str) -> str:
    """The first line of the last error's message in a result document, or ``""``."""
    if not result or '"traceback"' not in result:
        return ""
    try:
        attempts = json.loads(result)["attempts"]
        traceback = str(attempts[-1]["error"]["traceback"])
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return ""
    short = error_class.rpartition(".")[2]
    lines = traceback.rstrip("\n").split("\n")
    for index in range(len(lines) - 1, -1, -1):
        head, colon, rest = lines[index].partition(":")
        if head.rpartition(".")[2] == short and (colon or not rest):
            return rest.strip()
    return lines[-1].strip()


def log_outcome(
    entry: Entry,
    outcome: Outcome,
    word: str,
    seconds: float | None,
    name: str,
    reason: str | None,
) -> None:
    """Write the ``outcome=`` line of one settlement."""
    claim = entry.job.claim
    tail = f" retry_in={outcome.delay:.1f}" if word == "retry" else ""
    why = outcome.reason or reason
    if why:
        tail += f" reason={why}"
    log.log(
        logging.WARNING if word in ("lost", "failed") else logging.INFO,
        "outcome=%s queue=%s task=%s id=%s attempt=%d fence=%d seconds=%s%s",
        word,
        entry.queue,
        name or "-",
        claim.request_id,
        claim.attempt,
        claim.fence,
        "-" if seconds is None else f"{seconds:.3f}",
        tail,
    )


def handler_bug(worker_id: str, entry: Entry, exc: BaseException) -> Outcome:
    """Log a handler that raised (a bug, not the task's failure) and retry its job."""
    log.error(
        "worker %s: the handler of %s raised %r: retrying",
        worker_id,
        entry.queue,
        exc,
        exc_info=exc,
    )
    delay = Backoff().delay(entry.job.claim.attempt)
    return Outcome(State.PENDING, delay, reason=f"handler error: {type(exc).__name__}")


def trace_attributes(job: Job) -> dict[str, Any]:
    """The attributes of a run's span: enough to find its record."""
    claim = job.claim
    return {
        "ledger.queue": job.queue,
        "ledger.request_id": claim.request_id,
        "ledger.attempt": claim.attempt,
        "ledger.fence": claim.fence,
    }
