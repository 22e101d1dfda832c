"""Agreement of the record encoding's Python and Lua codecs, and the strategies of both.

The Python codec (``records.py``) and the Lua one (``lua/codec.lua``) write the same
version 1 format: bytes written by either must decode under the other, and every
change of stored bytes must be caught before anything acts on them. The Python codec's
own properties are ``test_codec_python.py``'s.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_ledger import (
    AdmissionStatus,
    CorruptRecord,
    Ledger,
    Record,
    SettlementStatus,
    State,
)
from django_ledger.core.records import checksum, decode_record, encode_record
from django_ledger.core.results import Settlement

# -- strategies ---------------------------------------------------------------------

#: Any Unicode scalar value: NUL, newlines, colons, emoji, astral characters; no
#: lone surrogates (those are not text the codec can store, see below).
ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",)))
#: Text the ledger accepts as a request id or an owner: no control characters.
USABLE_TEXT = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=24)
HEX = "0123456789abcdef"
TRACEPARENTS = st.builds(
    "00-{}-{}-{}".format,
    st.text(HEX, min_size=32, max_size=32).filter(lambda s: set(s) != {"0"}),
    st.text(HEX, min_size=16, max_size=16).filter(lambda s: set(s) != {"0"}),
    st.sampled_from(["00", "01"]),
)
INSTANTS = st.integers(min_value=0, max_value=2**53)
LEASES = st.integers(min_value=1, max_value=2**53)
#: Owners the format holds (at most 256 UTF-8 bytes).
OWNERS = st.text(st.characters(exclude_categories=("Cs",)), max_size=64)
COUNTS = st.integers(min_value=0, max_value=2**53)
NOTABLE_PAYLOADS = [
    "",
    "\x00",
    "a\x00b",
    "line one\nline two\r\n",
    "1:00000000:P:1::0:0:0:0:0:0:",
    ":" * 20,
    "🎉🚀",
    "\U0010ffff\U00010000",
    "e\u0301 \ufeff \u200d",
    "\x7f\x1b[31m",
]


@st.composite
def records(
    draw: st.DrawFn,
    ids: st.SearchStrategy[str] = ANY_TEXT.filter(bool),
    owners: st.SearchStrategy[str] = OWNERS,
    states: st.SearchStrategy[State] = st.sampled_from(State),
) -> Record:
    """Draw a record whose lease agrees with its state (as the codec requires)."""
    state = draw(states)
    return Record(
        request_id=draw(ids),
        payload=draw(st.one_of(st.sampled_from(NOTABLE_PAYLOADS), ANY_TEXT)),
        state=state,
        due_at=draw(INSTANTS),
        owner=draw(owners),
        attempts=draw(COUNTS),
        fence=draw(COUNTS),
        lease_until=draw(LEASES) if state is State.CLAIMED else None,
        created_at=draw(INSTANTS),
        updated_at=draw(INSTANTS),
        traceparent=draw(st.none() | TRACEPARENTS),
    )


# -- the Lua codec agrees -------------------------------------------------------------

#: The largest attempts and fence an import may give: far below 2**53, so that claims
#: can add to them exactly in Lua (whose numbers are doubles) for ever after.
MAX_IMPORTED_COUNT = 2**32
#: The largest fence an import may give: past every fence a counter seeded from the
#: server clock (microseconds) gives for a century, still far below 2**53.
MAX_IMPORTED_FENCE = 2**52

_QUEUES = itertools.count()
#: Records as the ledger takes them: usable ids and owners.
LEDGER_RECORDS = records(ids=USABLE_TEXT, owners=st.just("") | USABLE_TEXT)
RELAXED = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(params=[True, False], ids=["optimized", "reference"])
def optimized(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


MakeLedger = Callable[..., Ledger]


@pytest.fixture
def make_ledger(redis_client: redis.Redis, namespace: str) -> MakeLedger:
    """Return a factory of ledgers, each on a queue of its own (one per example)."""

    def make(optimized: bool, **options: Any) -> Ledger:
        return Ledger(redis_client, namespace, f"q{next(_QUEUES)}", optimized=optimized, **options)

    return make


def stored(ledger: Ledger, request_id: str) -> bytes:
    raw = ledger.redis.hget(ledger.records_key, request_id)
    assert raw is not None
    return bytes(raw)


def test_admission_refuses_a_lone_surrogate_and_stores_nothing(
    make_ledger: MakeLedger, optimized: bool
) -> None:
    ledger = make_ledger(optimized)
    admission = ledger.admit("r-1", "text \ud800 more")
    assert (admission.status, admission.reason) == (AdmissionStatus.REJECTED, "payload_not_utf8")
    assert ledger.redis.hlen(ledger.records_key) == 0


@RELAXED
@given(
    request_id=USABLE_TEXT,
    payload=st.one_of(st.sampled_from(NOTABLE_PAYLOADS), ANY_TEXT),
    traceparent=st.none() | TRACEPARENTS,
    owner=USABLE_TEXT,
)
def test_bytes_written_by_the_fused_scripts_decode_in_python(
    make_ledger: MakeLedger, request_id: str, payload: str, traceparent: str | None, owner: str
) -> None:
    ledger = make_ledger(True)
    admission = ledger.admit(request_id, payload, traceparent=traceparent)
    assert admission.status is AdmissionStatus.ADMITTED
    raw = stored(ledger, request_id)
    record = decode_record(request_id, raw)
    assert record == admission.record
    assert (record.payload, record.traceparent, record.state) == (
        payload,
        traceparent,
        State.PENDING,
    )
    # Canonical: Python writes exactly the bytes Lua wrote for the same record.
    assert encode_record(record) == raw

    claim = ledger.claim(owner, lease=60)
    assert claim is not None
    assert (claim.request_id, claim.payload, claim.owner, claim.traceparent) == (
        request_id,
        payload,
        owner,
        traceparent,
    )
    raw = stored(ledger, request_id)
    claimed = decode_record(request_id, raw)
    assert encode_record(claimed) == raw
    assert claimed == replace(
        record,
        state=State.CLAIMED,
        owner=owner,
        attempts=1,
        fence=claim.fence,
        lease_until=claim.lease_until,
        updated_at=claimed.updated_at,
    )
    assert claimed.lease_until == claimed.updated_at + 60_000

    settled = ledger.settle(claim, State.FAILED)
    assert settled.status is SettlementStatus.SETTLED
    raw = stored(ledger, request_id)
    assert decode_record(request_id, raw) == settled.record
    assert encode_record(settled.record) == raw


@RELAXED
@given(record=LEDGER_RECORDS, owner=USABLE_TEXT)
def test_bytes_encoded_in_python_are_accepted_by_the_scripts(
    make_ledger: MakeLedger, optimized: bool, record: Record, owner: str
) -> None:
    ledger = make_ledger(optimized)
    ledger.close_gate()
    # Imported as a due PENDING record, so that the scripts must decode it to claim it.
    pending = replace(record, state=State.PENDING, lease_until=None, due_at=0)
    pending = replace(
        pending,
        attempts=min(pending.attempts, MAX_IMPORTED_COUNT),
        fence=min(pending.fence, MAX_IMPORTED_FENCE),
    )
    admission = ledger.import_record(
        pending.request_id,
        pending.payload,
        pending.state,
        pending.due_at,
        pending.owner,
        attempts=pending.attempts,
        fence=pending.fence,
        created_at=pending.created_at,
        updated_at=pending.updated_at,
        traceparent=pending.traceparent,
    )
    assert admission.status is AdmissionStatus.ADMITTED
    assert stored(ledger, pending.request_id) == encode_record(pending)
    # The scripts decode it: admission of the same payload is a DUPLICATE ...
    assert ledger.admit(pending.request_id, pending.payload).status is AdmissionStatus.DUPLICATE
    ledger.open_gate()
    # ... and a claim takes it, keeping every field it does not change.
    claim = ledger.claim(owner)
    assert claim is not None
    assert (claim.request_id, claim.payload, claim.traceparent) == (
        pending.request_id,
        pending.payload,
        pending.traceparent,
    )
    # The fence: past the record's own, and past the queue's counter (seeded from the clock).
    assert claim.attempt == pending.attempts + 1 and claim.fence > pending.fence
    claimed = ledger.resolve(pending.request_id)
    assert claimed == replace(
        pending,
        state=State.CLAIMED,
        owner=owner,
        attempts=pending.attempts + 1,
        fence=claim.fence,
        lease_until=claim.lease_until,
        updated_at=claimed.updated_at,
    )


@RELAXED
@given(record=LEDGER_RECORDS)
def test_imported_records_of_every_state_satisfy_repair(
    make_ledger: MakeLedger, optimized: bool, record: Record
) -> None:
    ledger = make_ledger(optimized, retention=timedelta(days=100 * 365))
    now = ledger.server_time_ms()
    if record.state is State.CLAIMED:
        # A live lease, so that repair has nothing to take back, and an attempt made
        # (import refuses a claim at 0 attempts).
        record = replace(
            record,
            lease_until=now + 3_600_000,
            owner=record.owner or "w",
            attempts=max(1, record.attempts),
        )
    ledger.close_gate()
    record = replace(
        record,
        attempts=min(record.attempts, MAX_IMPORTED_COUNT),
        fence=min(record.fence, MAX_IMPORTED_FENCE),
    )
    extra = {"attempts": record.attempts, "fence": record.fence, "traceparent": record.traceparent}
    if record.lease_until is not None:
        extra["lease_until"] = record.lease_until
    admission = ledger.import_record(
        record.request_id,
        record.payload,
        record.state,
        record.due_at,
        record.owner,
        created_at=record.created_at,
        updated_at=record.updated_at,
        **extra,
    )
    assert admission.status is AdmissionStatus.ADMITTED
    assert ledger.resolve(record.request_id) == record
    # The repair scripts decode the Python bytes: nothing to quarantine or rebuild.
    report = ledger.repair_records([(record.request_id, encode_record(record))])
    assert report.counts() == {
        "scanned": 1,
        "reindexed": 0,
        "expired": 0,
        "dead": 0,
        "quarantined": 0,
        "purged": 0,
        "stale": 0,
    }
    assert ledger.resolve(record.request_id) == record
    assert ledger.redis.hlen(ledger.quarantine_key) == 0


@RELAXED
@given(payload=ANY_TEXT, data=st.data())
def test_the_scripts_detect_every_single_byte_change(
    make_ledger: MakeLedger, payload: str, data: st.DataObject
) -> None:
    ledger = make_ledger(True)
    ledger.admit("r-1", payload)
    raw = stored(ledger, "r-1")
    position = data.draw(st.integers(0, len(raw) - 1), label="position")
    value = data.draw(st.integers(0, 255).filter(lambda v: v != raw[position]), label="value")
    changed = raw[:position] + bytes([value]) + raw[position + 1 :]
    ledger.redis.hset(ledger.records_key, "r-1", changed)
    admission = ledger.admit("r-1", payload)
    assert (admission.status, admission.reason) == (AdmissionStatus.CONFLICT, "corrupt")
    assert ledger.claim("w") is None  # skipped, left for repair to quarantine
    assert stored(ledger, "r-1") == changed
    report = ledger.repair_records([("r-1", changed)])
    assert report.quarantined == 1
    assert ledger.redis.hget(ledger.quarantine_key, "r-1") == changed


def foreign_bytes(request_id: str, body: bytes) -> bytes:
    """Bytes with a valid checksum, as another writer of the format could store them."""
    return b"1" + checksum(request_id.encode(), body) + body


def with_text(request_id: str, owner: bytes, trace: bytes, payload: bytes) -> bytes:
    """A PENDING record, due long ago, holding these text fields as raw bytes."""
    template = encode_record(Record(request_id, "", State.PENDING, 0, created_at=1, updated_at=1))
    header = bytearray(template[9:61])
    header[49:52] = struct.pack(">HB", len(owner), len(trace))
    return foreign_bytes(request_id, bytes(header) + owner + trace + payload)


#: Byte strings at the edges of strict UTF-8, as Python's decoder draws them.
UTF8_EDGES = [
    b"",
    b"plain",
    "é🎉\U0010ffff".encode(),
    b"\xff\xfe",  # never valid
    b"\xc0\x80",  # overlong NUL
    b"\xe0\x80\xaf",  # overlong
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xf4\x90\x80\x80",  # past U+10FFFF
    b"\xe2\x82",  # cut short
    b"a\x80",  # a lone continuation byte
    b"\xf0\x9f\x8e",  # an emoji cut short
]


def python_accepts(request_id: str, raw: bytes) -> bool:
    try:
        decode_record(request_id, raw)
    except CorruptRecord:
        return False
    return True


@RELAXED
@given(
    field=st.sampled_from(["owner", "payload"]),
    text=st.sampled_from(UTF8_EDGES) | st.binary(max_size=12),
)
def test_lua_and_python_agree_on_which_text_is_utf8(
    make_ledger: MakeLedger, field: str, text: bytes
) -> None:
    ledger = make_ledger(True)
    raw = with_text(
        "x", text if field == "owner" else b"w", b"", text if field == "payload" else b"p"
    )
    ledger.redis.hset(ledger.records_key, "x", raw)
    ledger.redis.zadd(ledger.ready_key, {"x": 0})
    admission = ledger.admit("x", "another payload")
    lua_accepts = admission.reason != "corrupt"
    assert lua_accepts == python_accepts("x", raw)
    assert admission.status is AdmissionStatus.CONFLICT
    # A claim acts on the record exactly when both codecs accept it.
    claim = ledger.claim("w")
    assert (claim is not None) == lua_accepts
    if claim is not None:
        assert claim.payload.encode() == (text if field == "payload" else b"p")


@pytest.mark.parametrize("text", UTF8_EDGES)
def test_the_reference_path_agrees_on_which_text_is_utf8(
    make_ledger: MakeLedger, text: bytes
) -> None:
    ledger = make_ledger(False)
    raw = with_text("x", b"w", b"", text)
    ledger.redis.hset(ledger.records_key, "x", raw)
    ledger.redis.zadd(ledger.ready_key, {"x": 0})
    accepted = python_accepts("x", raw)
    admission = ledger.admit("x", "another payload")
    assert (admission.reason != "corrupt") == accepted
    assert (ledger.claim("w") is not None) == accepted


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "reference"])
def test_checksum_valid_bytes_that_are_not_utf8_are_corrupt_everywhere(
    make_ledger: MakeLedger, optimized: bool
) -> None:
    ledger = make_ledger(optimized)
    raw = with_text("x", b"w", b"", b"\xff\xfe not text")
    ledger.redis.hset(ledger.records_key, "x", raw)
    ledger.redis.zadd(ledger.ready_key, {"x": 0})
    ledger.admit("y", "fine")
    admission = ledger.admit("x", "p")
    assert (admission.status, admission.reason) == (AdmissionStatus.CONFLICT, "corrupt")
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "y"
    assert stored(ledger, "x") == raw
    assert ledger.repair_records([("x", raw)]).quarantined == 1


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "reference"])
def test_the_largest_importable_fence_still_grows_on_claim(
    make_ledger: MakeLedger, optimized: bool
) -> None:
    ledger = make_ledger(optimized)
    ledger.close_gate()
    with pytest.raises(ValueError, match="fence"):
        ledger.import_record("big", "p", State.PENDING, 0, fence=MAX_IMPORTED_FENCE + 1)
    top = MAX_IMPORTED_COUNT
    admission = ledger.import_record(
        "big", "p", State.PENDING, 0, attempts=top, fence=MAX_IMPORTED_FENCE
    )
    assert admission.status is AdmissionStatus.ADMITTED
    ledger.open_gate()
    claim = ledger.claim("w")
    assert claim is not None
    assert (claim.attempt, claim.fence) == (top + 1, MAX_IMPORTED_FENCE + 1)
    record = ledger.resolve("big")
    assert record is not None and record.fence == claim.fence


@given(records())
def test_a_settlements_due_at_read_from_its_bytes_is_the_decoded_records(record: Record) -> None:
    # The worker's counters read the wait time's due_at from the bytes, without decoding.
    raw = encode_record(record)
    answer = Settlement(SettlementStatus.SETTLED, request_id=record.request_id, raw=raw)
    assert answer.due_at == record.due_at
    assert answer.record is not None and answer.due_at == answer.record.due_at
