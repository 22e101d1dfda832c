"""A task payload's nesting is bounded: the encoder refuses a deeper one, readers refuse it.

Python's ``json`` recurses once per level, so a payload nested about a thousand levels
deep raised ``RecursionError`` in every reader, and a cyclic argument in the encoder.
Now the encoder says ``ValueError`` (or ``TypeError``) naming the argument's place, and
``decode_task`` says ``BadPayload`` for anything nested deeper than
``MAX_READ_DEPTH`` (``MAX_PAYLOAD_DEPTH`` and the levels a workflow step's inputs add).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from django_ledger.core.jobs import (
    MAX_PAYLOAD_DEPTH,
    MAX_READ_DEPTH,
    BadPayload,
    PayloadTemplate,
    decode_result,
    decode_task,
    encode_task,
    nesting_depth,
)


def nested(levels: int) -> Any:
    """A list nested ``levels`` deep (``[]`` is 1)."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def deep_payload(levels: int) -> str:
    """A task document whose whole nesting is ``levels`` (its object and args count 2)."""
    inner = "[" * (levels - 2) + "]" * (levels - 2)
    return '{"args":[' + inner + '],"kwargs":{},"task":"a.b","v":1}'


def test_the_deepest_payload_allowed_round_trips() -> None:
    payload = encode_task("a.b", [nested(MAX_PAYLOAD_DEPTH - 2)], {})
    assert nesting_depth(payload) == MAX_PAYLOAD_DEPTH
    assert decode_task(payload).args == [nested(MAX_PAYLOAD_DEPTH - 2)]


@pytest.mark.parametrize("levels", [MAX_PAYLOAD_DEPTH - 1, 900, 5_000])
def test_a_deeper_argument_is_a_value_error_naming_its_place(levels: int) -> None:
    with pytest.raises(ValueError, match=r"args\[1\] nests deeper than") as caught:
        encode_task("a.b", [1, nested(levels)], {})
    assert str(MAX_PAYLOAD_DEPTH) in str(caught.value)
    with pytest.raises(ValueError, match=r'kwargs\["deep"\] nests deeper than'):
        PayloadTemplate("a.b").encode([], {"deep": {"x": nested(levels)}})


def test_a_cyclic_argument_is_a_value_error_naming_its_place() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match=r"args\[0\]\[1\] refers to itself"):
        encode_task("a.b", [loop], {})
    ring: dict[str, Any] = {}
    ring["me"] = {"again": ring}
    with pytest.raises(ValueError, match=r'kwargs\["r"\]\["me"\]\["again"\] refers to itself'):
        encode_task("a.b", [], {"r": ring})


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "place"),
    [
        (
            [],
            {"when": datetime(2026, 1, 1)},
            TypeError,
            r'kwargs\["when"\] is of type datetime\.datetime',
        ),
        ([{"x": object()}], {}, TypeError, r'args\[0\]\["x"\] is of type object,'),
        ([1, [2, float("nan")]], {}, ValueError, r"args\[1\]\[1\] is NaN"),
        ([{1: "a", "b": 2}], {}, TypeError, r"args\[0\] has keys of types that do not sort"),
        ([{(1, 2): "a"}], {}, TypeError, r"args\[0\] has a key of type tuple"),
    ],
)
def test_what_json_cannot_hold_is_named_by_its_place(
    args: list[Any], kwargs: dict[str, Any], error: type[Exception], place: str
) -> None:
    with pytest.raises(error, match=place):
        encode_task("a.b", args, kwargs)


@pytest.mark.parametrize("levels", [MAX_READ_DEPTH + 1, 900, 100_000])
def test_decode_refuses_a_payload_nested_too_deep(levels: int) -> None:
    with pytest.raises(BadPayload, match=f"deeper than {MAX_READ_DEPTH}"):
        decode_task(deep_payload(levels))


def test_decode_reads_what_a_workflow_release_builds_from_stored_results() -> None:
    # A chord's callback: its object, args, the list of results, then a result that nests
    # MAX_PAYLOAD_DEPTH levels (the most a task's return value may).
    payload = deep_payload(MAX_READ_DEPTH)
    assert decode_task(payload).args


def test_decode_counts_no_bracket_inside_a_string() -> None:
    text = "[" * 500
    payload = encode_task("a.b", [text, {"k": "]" * 500}], {})
    assert decode_task(payload).args == [text, {"k": "]" * 500}]


def test_a_result_document_too_deep_for_json_is_a_bad_payload() -> None:
    raw = '{"v":1,"attempts":[],"return_value":' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(BadPayload):
        decode_result(raw)


@pytest.mark.parametrize(
    ("text", "depth"),
    [("", 0), ("1", 0), ("[]", 1), ('{"a":[{}]}', 3), ('["[[[", {"]": []}]', 3)],
)
def test_nesting_depth(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth
    assert nesting_depth(text) == _depth(json.loads(text)) if text else True


def test_nesting_depth_stops_counting_past_the_limit() -> None:
    assert nesting_depth("[" * 1_000_000, limit=10) == 11


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0
