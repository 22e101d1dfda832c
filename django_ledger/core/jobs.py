"""What a task is on the ledger: its payload document, and the result stored with it.

A task's payload is a versioned JSON document (``docs/encoding.md``), so any language can
enqueue one through the REST API (written canonically: keys sorted, no spaces)::

    {"args":[1042],"kwargs":{},"options":{"max_attempts":5},"task":"shop.tasks.send_receipt","v":1}

The result is a JSON document a worker stores with each settlement of an attempt
(``Ledger.settle(..., result=)``), in the same script call::

    {"v": 1, "attempts": [{"worker_id": "w-1", "started_at": 1764493200000,
                           "finished_at": 1764493200042, "error": null}],
     "return_value": {"sent": true}}

Each attempt that raised carries ``error``: ``{"exception_class_path": "...",
"traceback": "..."}``. ``return_value`` is present once an attempt returned. Neither
document imports Django: the task backend builds Django's ``TaskResult`` from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PAYLOAD_VERSION",
    "RESULT_VERSION",
    "Attempt",
    "BadPayload",
    "PayloadTemplate",
    "ResultDoc",
    "TaskPayload",
    "decode_result",
    "decode_task",
    "encode_result",
    "encode_task",
]

PAYLOAD_VERSION = 1
RESULT_VERSION = 1
#: Option names a payload may carry (each also settable per task and per queue).
OPTION_NAMES = frozenset(
    {"max_attempts", "backoff_base", "backoff_cap", "retry_on", "timeout", "lease", "unique"}
)


class BadPayload(ValueError):
    """A payload or result document that is not what this version reads."""


@dataclass(frozen=True)
class TaskPayload:
    """A decoded task payload: which task, with what arguments and options."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Attempt:
    """One attempt of a task as its worker recorded it."""

    worker_id: str
    started_at: int
    finished_at: int | None = None
    error: dict[str, str] | None = None


@dataclass
class ResultDoc:
    """Every recorded attempt of a task, and its return value once it returned."""

    attempts: list[Attempt] = field(default_factory=list)
    has_return_value: bool = False
    return_value: Any = None


def _dumps(value: Any, *, sort_keys: bool = False) -> str:
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=sort_keys
    )


#: ``_dumps(value, sort_keys=True)``, with its encoder built once rather than per call.
_canonical = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=True
).encode


class PayloadTemplate:
    """The payloads of one task with one set of options: all but the arguments encoded once.

    Its keys sorted, a payload document reads ``{"args":..,"kwargs":..,"options":..,
    "task":..,"v":1}``: the arguments lead and the rest is the same for every call, so
    ``encode`` writes only the arguments, with the encoder ``encode_task`` uses, and the
    bytes are exactly ``encode_task``'s (a test holds them to it).
    """

    __slots__ = ("_tail", "task")

    def __init__(self, task: str, options: dict[str, Any] | None = None) -> None:
        if not isinstance(task, str) or not task:
            raise TypeError("task must be a non-empty dotted path")
        unknown = sorted(set(options or {}) - OPTION_NAMES)
        if unknown:
            raise ValueError(f"unknown task option(s): {', '.join(unknown)}")
        self.task = task
        tail = f',"options":{_canonical(dict(options))}' if options else ""
        self._tail = f'{tail},"task":{_canonical(task)},"v":{PAYLOAD_VERSION}}}'

    def encode(self, args: list[Any], kwargs: dict[str, Any]) -> str:
        """Encode one call (a list and a dict); ``TypeError``/``ValueError`` as ``encode_task``."""
        encoded_kwargs = _canonical(kwargs) if kwargs else "{}"
        return f'{{"args":{_canonical(args)},"kwargs":{encoded_kwargs}{self._tail}'


def encode_task(
    task: str, args: list[Any], kwargs: dict[str, Any], options: dict[str, Any] | None = None
) -> str:
    """Encode a task payload; raise ``TypeError`` or ``ValueError`` for what JSON cannot hold.

    The encoding is canonical (object keys sorted, no spaces): the same call gives the
    same bytes, which is what idempotent admission compares. Many calls of one task:
    ``PayloadTemplate``.
    """
    return PayloadTemplate(task, options).encode(list(args), dict(kwargs))


def decode_task(payload: str) -> TaskPayload:
    """Decode a task payload, or raise ``BadPayload`` saying what is wrong with it."""
    try:
        document = json.loads(payload)
    except ValueError as exc:
        raise BadPayload(f"the payload is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise BadPayload("the payload is not a JSON object")
    if document.get("v") != PAYLOAD_VERSION:
        raise BadPayload(f"payload version {document.get('v')!r} is not {PAYLOAD_VERSION}")
    task, args = document.get("task"), document.get("args", [])
    kwargs, options = document.get("kwargs", {}), document.get("options", {})
    if not isinstance(task, str) or not task:
        raise BadPayload("the payload names no task")
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise BadPayload("args must be a JSON array and kwargs a JSON object")
    if not isinstance(options, dict) or set(options) - OPTION_NAMES:
        raise BadPayload(f"options must be an object of {sorted(OPTION_NAMES)}")
    return TaskPayload(task, args, kwargs, options)


def encode_result(doc: ResultDoc) -> str:
    """Encode a result document; raise ``TypeError``/``ValueError`` for a non-JSON value."""
    attempts = [
        {
            "worker_id": attempt.worker_id,
            "started_at": attempt.started_at,
            "finished_at": attempt.finished_at,
            "error": attempt.error,
        }
        for attempt in doc.attempts
    ]
    document: dict[str, Any] = {"v": RESULT_VERSION, "attempts": attempts}
    if doc.has_return_value:
        document["return_value"] = doc.return_value
    return _dumps(document)


def decode_result(raw: str | bytes | None) -> ResultDoc:
    """Decode a stored result document (``None``: nothing stored yet)."""
    if raw is None:
        return ResultDoc()
    try:
        document = json.loads(raw)
        attempts = [
            Attempt(
                worker_id=str(item["worker_id"]),
                started_at=int(item["started_at"]),
                finished_at=None if item.get("finished_at") is None else int(item["finished_at"]),
                error=item.get("error"),
            )
            for item in document["attempts"]
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise BadPayload(f"the stored result is not a result document: {exc}") from exc
    if document.get("v") != RESULT_VERSION:
        raise BadPayload(f"result version {document.get('v')!r} is not {RESULT_VERSION}")
    return ResultDoc(attempts, "return_value" in document, document.get("return_value"))
