"""A task's attempt history: the attempts repair records for workers that never settled.

A worker stores the result document (``jobs.py``) with each settlement of an attempt.
An attempt whose worker died, or lost its lease, settles nothing: repair appends it to
the document, in the same script call that expires its lease (``repair.lua`` writes the
same bytes as ``with_attempt(raw, lost_attempt_json(...))``), with what the record
holds then: its owner, its ``updated_at`` as the start (the claim, or the attempt's
start or last renewal when it had one: the record keeps no separate claim time), the
lease's expiry as the end, and an error of class ``LEASE_EXPIRED_PATH``.
"""

from __future__ import annotations

import json

from .jobs import RESULT_VERSION
from .records import Record
from .runner import Runner

__all__ = [
    "LEASE_EXPIRED_PATH",
    "lost_attempt_error",
    "lost_attempt_json",
    "lost_result",
    "with_attempt",
]

#: The error class of an attempt whose worker never settled it (``tasks.LeaseExpired``).
LEASE_EXPIRED_PATH = "django_ledger.tasks.exceptions.LeaseExpired"
_EMPTY = f'{{"v":{RESULT_VERSION},"attempts":[]}}'


def lost_attempt_error(worker_id: str, number: int) -> dict[str, str]:
    """The error of attempt ``number``, which worker ``worker_id`` never settled."""
    return {
        "exception_class_path": LEASE_EXPIRED_PATH,
        "traceback": (
            f"Attempt {number} was claimed by worker '{worker_id}', which stopped before it "
            "settled (it died, or lost its lease); the ledger's repair took the task back.\n"
            f"LeaseExpired: attempt {number} never settled\n"
        ),
    }


def lost_attempt_json(worker_id: str, number: int, started_at: int, finished_at: int) -> str:
    """Attempt ``number`` as repair records it, the bytes ``repair.lua`` writes."""
    attempt = {
        "worker_id": worker_id,
        "started_at": started_at,
        "finished_at": finished_at,
        "error": lost_attempt_error(worker_id, number),
    }
    return json.dumps(attempt, ensure_ascii=False, separators=(",", ":"))


def with_attempt(raw: str | bytes | None, attempt_json: str) -> str | None:
    """The stored result document ``raw`` with ``attempt_json`` appended to its attempts.

    Only a document of exactly ``v`` and ``attempts`` (no return value), as a worker
    writes it, is extended, spliced so that its other bytes stay as they are; anything
    else gives ``None`` and is left alone. ``repair.lua`` decides and splices alike.
    """
    if raw is None:
        return f"{_EMPTY[:-2]}{attempt_json}]}}"
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or set(document) != {"v", "attempts"}:
        return None
    if document["v"] != RESULT_VERSION or not isinstance(document["attempts"], list):
        return None
    if not text.startswith(_EMPTY[:-2]) or not text.endswith("]}"):
        return None
    separator = "," if document["attempts"] else ""
    return f"{text[:-2]}{separator}{attempt_json}]}}"


def lost_result(runner: Runner, record: Record) -> bytes:
    """The stored result document with the lost attempt of CLAIMED ``record`` appended.

    What the reference repair stores as it expires the lease of a started claim; ``b""``
    (store nothing) when the stored document is not one it extends.
    """
    assert record.lease_until is not None
    with runner.translate_errors():
        raw = runner.redis.hget(runner.keys.results, record.request_id)
    attempt = lost_attempt_json(
        record.owner, record.attempts, record.updated_at, record.lease_until
    )
    doc = with_attempt(raw, attempt)
    return b"" if doc is None else doc.encode("utf-8")
