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

A payload nests at most ``MAX_PAYLOAD_DEPTH`` arrays and objects deep (its own object
and its ``args`` array count two): the encoder refuses a deeper call, naming the
argument. A workflow step's released payload holds its parents' results (each held to
``MAX_PAYLOAD_DEPTH`` when it was stored) inside its ``args``, up to three levels deeper:
``decode_task`` reads up to ``MAX_READ_DEPTH`` and refuses a deeper payload, so no reader
recurses past it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_PAYLOAD_DEPTH",
    "MAX_READ_DEPTH",
    "PAYLOAD_VERSION",
    "RESULT_VERSION",
    "Attempt",
    "BadPayload",
    "PayloadTemplate",
    "ResultDoc",
    "TaskPayload",
    "argument_problem",
    "decode_result",
    "decode_task",
    "encode_result",
    "encode_task",
    "nesting_depth",
    "payload_problem",
    "too_deep",
]

PAYLOAD_VERSION = 1
RESULT_VERSION = 1
#: Option names a payload may carry (each also settable per task and per queue).
OPTION_NAMES = frozenset(
    {
        "max_attempts",
        "backoff_base",
        "backoff_cap",
        "retry_on",
        "timeout",
        "lease",
        "unique",
        "debounce",
        "debounce_max",
    }
)
#: The deepest nesting of arrays and objects a payload may have (its own object is 1,
#: its ``args`` array 2): about what any JSON reader takes without recursing too deep.
MAX_PAYLOAD_DEPTH = 64
#: The deepest nesting a payload is read with: ``MAX_PAYLOAD_DEPTH`` and the three levels
#: a released workflow step adds around a parent's result (its own object, ``args``, and
#: the list of a chord's callback), so every result a task could store can be passed on.
MAX_READ_DEPTH = MAX_PAYLOAD_DEPTH + 3


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


#: ``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
#: sort_keys=True)``, with its encoder built once rather than per call.
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
        try:
            encoded_kwargs = _canonical(kwargs) if kwargs else "{}"
            payload = f'{{"args":{_canonical(args)},"kwargs":{encoded_kwargs}{self._tail}'
        except (TypeError, ValueError, RecursionError) as exc:
            problem = argument_problem(args, kwargs)
            if problem is None:  # what the walk does not know: json's own words
                raise (ValueError if isinstance(exc, RecursionError) else type(exc))(
                    str(exc)
                ) from exc
            raise problem from exc
        if too_deep(payload):
            raise argument_problem(args, kwargs) or ValueError(f"the payload {_TOO_DEEP}")
        return payload


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
    if too_deep(payload, MAX_READ_DEPTH):
        raise BadPayload(
            f"the payload nests deeper than {MAX_READ_DEPTH} levels of arrays and objects "
            f"(enqueue holds it to {MAX_PAYLOAD_DEPTH}; a workflow step's inputs add up to 3)"
        )
    try:
        document = json.loads(payload)
    except (ValueError, RecursionError) as exc:
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


def payload_problem(payload: str) -> str | None:
    """Say why ``payload`` does not decode as a task document, or ``None`` if it does."""
    try:
        decode_task(payload)
    except BadPayload as exc:
        return str(exc)
    return None


def encode_result(doc: ResultDoc) -> str:
    """Encode a result document; raise ``TypeError``/``ValueError`` for a non-JSON value."""
    # Each attempt's fields by hand: dataclasses.asdict deep-copies, a cost on every settle.
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
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


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
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise BadPayload(f"the stored result is not a result document: {exc}") from exc
    if document.get("v") != RESULT_VERSION:
        raise BadPayload(f"result version {document.get('v')!r} is not {RESULT_VERSION}")
    return ResultDoc(attempts, "return_value" in document, document.get("return_value"))


# -- nesting, and the place of what JSON cannot hold ----------------------------------

_TOO_DEEP = (
    f"nests deeper than {MAX_PAYLOAD_DEPTH} levels of arrays and objects (the payload's "
    "own object and its args array count two)"
)
# A JSON string, escapes included (the unrolled form: no backtracking per character).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
#: What JSON holds as a value without nesting, and as an object's key (bool is an int).
_SCALARS = (str, int, float, type(None))


def nesting_depth(text: str, limit: int = MAX_PAYLOAD_DEPTH) -> int:
    """Return how deep arrays and objects nest in JSON ``text``, counting to ``limit + 1``.

    Brackets inside strings do not count. A loop, not recursion, that stops as soon as
    it passes ``limit``; text that is not JSON gets some number that ``json`` refuses
    anyway.
    """
    depth = deepest = 0
    for bracket in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if bracket == "[" or bracket == "{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        else:
            depth -= 1
    return deepest


def too_deep(text: str, limit: int = MAX_PAYLOAD_DEPTH) -> bool:
    """Whether JSON ``text`` nests deeper than ``limit``; a count first, so it is cheap.

    Text holding at most ``limit`` opening brackets cannot nest deeper, and is not
    scanned (nearly every payload).
    """
    return text.count("[") + text.count("{") > limit and nesting_depth(text, limit) > limit


def argument_problem(
    args: Any, kwargs: Any, *, limit: int = MAX_PAYLOAD_DEPTH, loose: bool = False
) -> TypeError | ValueError | None:
    """Return the error of the first argument no payload may hold, naming its place.

    ``args[0]["x"] is of type datetime.datetime``, ``kwargs["loop"][1] refers to
    itself``, ``args[2] nests deeper than ...``: what JSON cannot hold, a cycle, and
    nesting past ``limit`` (an argument sits at level 3). A loop, not recursion.
    ``loose``: any mapping and sequence count as objects and arrays, and bytes as text
    (as Django's ``normalize_json`` reads them).
    """
    top: list[tuple[str, Any]] = [(f"args[{i}]", arg) for i, arg in enumerate(args)]
    top += [(f"kwargs[{_key(key)}]", value) for key, value in dict(kwargs).items()]
    for place, value in top:
        problem = _problem(place, value, limit, loose)
        if problem is not None:
            return problem
    return None


def _problem(top: str, value: Any, limit: int, loose: bool) -> TypeError | ValueError | None:
    # (place, value, level, containers on the way down): depth-first, in order.
    stack: list[tuple[str, Any, int, tuple[int, ...]]] = [(top, value, 3, ())]
    while stack:
        place, item, level, above = stack.pop()
        children = _children(item, loose)
        if children is None:
            problem = _scalar_problem(place, item, loose)
            if problem is not None:
                return problem
            continue
        if id(item) in above:
            return ValueError(f"{place} refers to itself (a circular reference)")
        if level > limit:
            return ValueError(f"{top} {_TOO_DEEP}")
        if isinstance(item, Mapping):
            problem = _keys_problem(place, list(item), loose)
            if problem is not None:
                return problem
        below = (*above, id(item))
        stack.extend(
            (f"{place}[{label}]", child, level + 1, below)
            for label, child in reversed(list(children))
        )
    return None


def _children(item: Any, loose: bool) -> Iterator[tuple[str, Any]] | None:
    if isinstance(item, dict) or (loose and isinstance(item, Mapping)):
        return ((_key(key), value) for key, value in item.items())
    if isinstance(item, list | tuple) or (
        loose and isinstance(item, Sequence) and not isinstance(item, str | bytes | bytearray)
    ):
        return ((str(index), value) for index, value in enumerate(item))
    return None


def _scalar_problem(place: str, item: Any, loose: bool) -> TypeError | ValueError | None:
    if isinstance(item, float) and not math.isfinite(item):
        name = "NaN" if math.isnan(item) else ("-Infinity" if item < 0 else "Infinity")
        return ValueError(f"{place} is {name}, which JSON cannot hold")
    if isinstance(item, _SCALARS):
        return None
    if loose and isinstance(item, bytes):
        try:
            item.decode("utf-8")
        except UnicodeDecodeError:
            return ValueError(f"{place} is bytes that are not UTF-8 text")
        return None
    return TypeError(f"{place} is of type {_type_name(item)}, which JSON cannot hold")


def _keys_problem(place: str, keys: list[Any], loose: bool) -> TypeError | None:
    for key in keys:
        if not isinstance(key, _SCALARS) and not (loose and isinstance(key, bytes)):
            return TypeError(f"{place} has a key of type {_type_name(key)}, which JSON cannot hold")
    try:
        sorted(keys)
    except TypeError:  # the payload's keys are sorted: str and int keys together do not sort
        return TypeError(f"{place} has keys of types that do not sort (str and int, ...)")
    return None


def _key(key: Any) -> str:
    return json.dumps(key, ensure_ascii=False) if isinstance(key, str) else repr(key)


def _type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
