"""Admission (``Ledger.admit``, ``admit_many``): checked, cut in transport batches, stored
once by request id, on the fused or the reference path."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from . import fused, reference
from .arguments import check_priority
from .ledger_base import LedgerBase
from .limits import key_of
from .records import id_problem, traceparent_problem
from .results import Admission, AdmissionStatus
from .timing import duration_ms
from .transport import batches, utf8_len

__all__ = ["admit", "admit_many", "check_payload", "checked_request", "request_pair"]


def admit(
    ledger: LedgerBase,
    request_id: str,
    payload: str,
    delay: timedelta | float = 0,
    traceparent: str | None = None,
    priority: int = 0,
) -> Admission:
    """Admit one request, once by its id.

    ``priority`` (-100 to 100, default 0): among records due now, a higher one is
    claimed first; equal priorities in due order.
    """
    if not ledger.optimized or traceparent is not None or ledger.limit_key is not None:
        return admit_many(ledger, [(request_id, payload)], delay, traceparent, priority)[0]
    # admit_many's steps for one request and no traceparent: no lists, no batching.
    delay_ms = duration_ms(delay, "delay")
    check_priority(priority)
    problem, data = checked_request(ledger, request_id, payload, None)
    if problem is not None:
        return Admission(request_id, AdmissionStatus.REJECTED, problem)
    batch = [(0, request_id, data)]
    return fused.admit(ledger.runner, batch, delay_ms, "", ledger.max_records, priority)[0]


def request_pair(item: object) -> tuple[Any, Any]:
    """One ``admit_many`` request as ``(request_id, payload)``; ``TypeError`` if no pair."""
    if not isinstance(item, tuple | list) or len(item) != 2:
        raise TypeError("each request must be a (request_id, payload) pair")
    return item[0], item[1]


def check_payload(payload: object) -> str:
    if not isinstance(payload, str):
        raise TypeError(f"payload must be a str, not {type(payload).__name__}")
    return payload


def checked_request(
    ledger: LedgerBase, request_id: object, payload: object, trace_problem: str | None
) -> tuple[str | None, bytes]:
    """Return why one request is refused (``None``: it is not) and its payload's bytes."""
    problem = id_problem(request_id) or trace_problem
    text = check_payload(payload)
    if problem is not None:
        return problem, b""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return "payload_not_utf8", b""
    if len(data) > ledger.max_payload_bytes:
        return "payload_too_large", b""
    return None, data


def admit_many(
    ledger: LedgerBase,
    requests: Iterable[tuple[str, str]],
    delay: timedelta | float = 0,
    traceparent: str | None = None,
    priority: int = 0,
) -> list[Admission]:
    """Admit requests in transport batches; results come in input order.

    Not all-or-nothing: if the call is interrupted, any prefix may be stored, and
    calling again with the same requests reconciles (``DUPLICATE`` for those).
    """
    delay_ms = duration_ms(delay, "delay")
    check_priority(priority)
    trace_problem = traceparent_problem(traceparent)
    results: list[Admission | None] = []
    ready: list[tuple[int, str, bytes]] = []
    path = ledger.limit_key
    keys: dict[int, str] = {}
    for item in requests:
        request_id, payload = request_pair(item)
        problem, data = checked_request(ledger, request_id, payload, trace_problem)
        if problem is None and path is not None:
            key = key_of(path, payload)
            if key is None:
                problem = "limit_key_invalid"
            else:
                keys[len(results)] = key
        if problem is not None:
            results.append(Admission(request_id, AdmissionStatus.REJECTED, problem))
        else:
            ready.append((len(results), request_id, data))
            results.append(None)
    for batch in batches(ready, lambda item: utf8_len(item[1]) + len(item[2])):
        if ledger.optimized:
            answers = fused.admit(
                ledger.runner,
                batch,
                delay_ms,
                traceparent or "",
                ledger.max_records,
                priority,
                [keys[position] for position, _, _ in batch] if path is not None else None,
            )
        else:
            answers = [
                reference.admit(
                    ledger.runner,
                    request_id,
                    data,
                    delay_ms,
                    traceparent or "",
                    ledger.max_records,
                    priority,
                )
                for _, request_id, data in batch
            ]
        for (position, _, _), answer in zip(batch, answers, strict=True):
            results[position] = answer
    return [result for result in results if result is not None]
