"""admit's refusals: REJECTED for what the format cannot hold, a type or value error for
what is not text or a usable delay; either way nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
import redis

from django_ledger import AdmissionStatus, Ledger
from tests.core.test_admit import ADMITTED, REJECTED
from tests.support.ledger_helpers import TRACEPARENT, dump, namespace_keys

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.mark.parametrize(
    ("request_id", "payload", "reason"),
    [
        ("", "p", "id_empty"),
        ("x" * 257, "p", "id_too_long"),
        ("é" * 128 + "x", "p", "id_too_long"),  # 257 UTF-8 bytes in 129 characters
        ("tab\there", "p", "id_control_character"),
        ("new\nline", "p", "id_control_character"),
        ("nul\x00", "p", "id_control_character"),
        ("del\x7f", "p", "id_control_character"),
        ("trailing\n", "p", "id_control_character"),
        ("lone \ud800 surrogate", "p", "id_not_utf8"),
        ("ok", "lone \udfff surrogate", "payload_not_utf8"),
    ],
)
def test_rejected_writes_nothing(
    ledger: Ledger,
    redis_client: redis.Redis,
    namespace: str,
    request_id: str,
    payload: str,
    reason: str,
) -> None:
    admission = ledger.admit(request_id, payload)
    assert admission.status is REJECTED
    assert admission.reason == reason
    assert admission.record is None
    assert not admission.accepted
    assert admission.request_id == request_id
    assert namespace_keys(redis_client, namespace) == set()


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ("x" * 10, ADMITTED),
        ("x" * 11, REJECTED),
        ("é" * 5, ADMITTED),  # 10 bytes in 5 characters
        ("é" * 5 + "x", REJECTED),  # 11 bytes in 6 characters
        ("€" * 3 + "x", ADMITTED),  # 10 bytes in 4 characters
        ("€" * 3 + "é", REJECTED),  # 11 bytes in 4 characters
        ("\U0001f680" * 2 + "xx", ADMITTED),  # 10 bytes in 4 characters
        ("\U0001f680" * 3, REJECTED),  # 12 bytes in 3 characters
    ],
)
def test_payload_limit_counts_utf8_bytes(
    ledger_factory: Callable[..., Ledger],
    redis_client: redis.Redis,
    namespace: str,
    payload: str,
    status: AdmissionStatus,
) -> None:
    ledger = ledger_factory(max_payload_bytes=10)
    admission = ledger.admit("p", payload)
    assert admission.status is status
    if status is REJECTED:
        assert admission.reason == "payload_too_large"
        assert namespace_keys(redis_client, namespace) == set()
    else:
        record = ledger.resolve("p")
        assert record is not None
        assert record.payload == payload


@pytest.mark.parametrize(
    "traceparent",
    [
        "",
        "garbage",
        "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",  # upper case
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # zero span id
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # forbidden version
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # no flags
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
    ],
)
def test_invalid_traceparent_is_rejected(
    ledger: Ledger, redis_client: redis.Redis, namespace: str, traceparent: str
) -> None:
    admission = ledger.admit("t", "p", traceparent=traceparent)
    assert (admission.status, admission.reason) == (REJECTED, "traceparent_invalid")
    assert namespace_keys(redis_client, namespace) == set()


def test_traceparent_with_trailing_newline_is_rejected(
    ledger: Ledger, redis_client: redis.Redis, namespace: str
) -> None:
    admission = ledger.admit("t", "p", traceparent=TRACEPARENT + "\n")
    assert (admission.status, admission.reason) == (REJECTED, "traceparent_invalid")
    assert namespace_keys(redis_client, namespace) == set()


def test_rejection_leaves_existing_record_alone(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_payload_bytes=4)
    ledger.admit("a", "abcd")
    before = dump(ledger)
    assert ledger.admit("a", "abcde").status is REJECTED
    assert ledger.admit("a", "abcd", traceparent="bad").status is REJECTED
    assert dump(ledger) == before


# -- TypeError and ValueError -----------------------------------------------------------


@pytest.mark.parametrize(
    ("request_id", "payload"),
    [
        (1, "p"),
        (None, "p"),
        (b"bytes", "p"),
        ("id", 1),
        ("id", None),
        ("id", b"bytes"),
        ("id", {"a": 1}),
    ],
)
def test_non_text_id_or_payload_is_a_type_error(
    ledger: Ledger, redis_client: redis.Redis, namespace: str, request_id: object, payload: object
) -> None:
    with pytest.raises(TypeError):
        ledger.admit(request_id, payload)  # type: ignore[arg-type]
    assert namespace_keys(redis_client, namespace) == set()


@pytest.mark.parametrize("delay", ["5", None, True, [1], b"1"])
def test_bad_delay_type_is_a_type_error(
    ledger: Ledger, redis_client: redis.Redis, namespace: str, delay: object
) -> None:
    with pytest.raises(TypeError, match="delay"):
        ledger.admit("a", "p", delay=delay)  # type: ignore[arg-type]
    assert namespace_keys(redis_client, namespace) == set()


@pytest.mark.parametrize(
    "delay", [-1, -0.5, timedelta(seconds=-1), float("nan"), float("inf"), 10**12]
)
def test_bad_delay_value_is_a_value_error(
    ledger: Ledger, redis_client: redis.Redis, namespace: str, delay: object
) -> None:
    with pytest.raises(ValueError, match="delay"):
        ledger.admit("a", "p", delay=delay)  # type: ignore[arg-type]
    assert namespace_keys(redis_client, namespace) == set()


@pytest.mark.parametrize("traceparent", [1, b"00-...", ["x"]])
def test_non_text_traceparent_is_a_type_error(
    ledger: Ledger, redis_client: redis.Redis, namespace: str, traceparent: object
) -> None:
    with pytest.raises(TypeError, match="traceparent"):
        ledger.admit("a", "p", traceparent=traceparent)  # type: ignore[arg-type]
    assert namespace_keys(redis_client, namespace) == set()
