"""Unique admission (core/unique.py, unique.lua): a call held by one record at a time.

The holder's state is read in the admission's own script, so a claim releases a call
held until its start at the claim itself; fields whose record is gone are dropped.
"""

from __future__ import annotations

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.core.results import AdmissionStatus
from django_ledger.core.unique import Debounce, UniqueMode, UniqueNotHere, admit_unique

pytest_plugins = ["tests.support.ledger_fixtures"]

START, END = UniqueMode.START, UniqueMode.END


def test_a_claim_releases_a_call_held_until_its_start(
    redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "q")
    first = admit_unique(ledger, "r-1", "{}", mode=START, digest="call")
    assert first.status is AdmissionStatus.ADMITTED and first.request_id == "r-1"
    repeat = admit_unique(ledger, "r-2", "{}", mode=START, digest="call")
    assert (repeat.status, repeat.request_id) == (AdmissionStatus.DUPLICATE, "r-1")
    differs = admit_unique(ledger, "r-3", '{"x":1}', mode=START, digest="call")
    assert (differs.status, differs.reason) == (AdmissionStatus.CONFLICT, "payload_differs")
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "r-1"
    after = admit_unique(ledger, "r-4", "{}", mode=START, digest="call")
    assert (after.status, after.request_id) == (AdmissionStatus.ADMITTED, "r-4")
    # A retry of r-1 (PENDING again, started once) does not hold the call back.
    ledger.settle(claim, State.PENDING, 0)
    assert admit_unique(ledger, "r-5", "{}", mode=START, digest="call").request_id == "r-4"
    assert ledger.stats().pending == 2


def test_fields_of_records_gone_are_dropped_by_later_admissions(
    redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "q", retention=0)
    admit_unique(ledger, "r-1", "{}", mode=END, digest="old")
    claim = ledger.claim("w")
    assert claim is not None
    ledger.settle(claim, State.COMPLETED, 0)
    ledger.sweep()
    assert ledger.resolve("r-1") is None
    unique = ledger.runner.keys.unique
    assert redis_client.hexists(unique, "old")
    admit_unique(ledger, "r-2", "{}", mode=END, digest="new")
    assert not redis_client.hexists(unique, "old")
    assert redis_client.hget(unique, "new") == b"r-2"


def test_a_debounce_never_moves_a_record_earlier(redis_client: redis.Redis, namespace: str) -> None:
    ledger = Ledger(redis_client, namespace, "q")
    slow = Debounce(delay_ms=1_000, most_ms=10_000)
    first = admit_unique(ledger, "r-1", "{}", mode=START, digest="c", debounce=slow, delay_ms=8_000)
    due = first.record.due_at  # type: ignore[union-attr]
    assert due == first.record.created_at + 8_000  # type: ignore[union-attr]
    admit_unique(ledger, "r-2", "{}", mode=START, digest="c", debounce=slow)
    assert ledger.resolve("r-1").due_at == due  # type: ignore[union-attr]


def test_a_queue_with_a_key_refuses_it(redis_client: redis.Redis, namespace: str) -> None:
    ledger = Ledger(redis_client, namespace, "q")
    ledger.limit_key = "kwargs.tenant"
    with pytest.raises(UniqueNotHere, match="has a KEY"):
        admit_unique(ledger, "r-1", "{}", mode=START, digest="c")
    with pytest.raises(ValueError, match="a digest names the call"):
        admit_unique(Ledger(redis_client, namespace, "p"), "r-1", "{}", mode=START)
    assert ledger.stats().total == 0
