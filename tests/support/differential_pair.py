"""What the differential test compares of its two ledgers, and the ids it expects claimed.

``tests/test_differential.py`` drives an optimized and a reference ledger with the same
random operations; ``PairViews`` is the part of its state machine that reads them.

Milliseconds: the optimized ledger often makes two calls in one millisecond where the
reference ledger, slower, makes them a few apart; ties of instants go to the lowest id,
so records ended by two calls (two pages of a repair) would be purged past max_retained
in another order. So after every step, and between the calls of a repair, both clocks
move on a millisecond: each call's instant is later than the one before it in both.

Ties: records due in the same slot may be claimed in a different order by the two
ledgers (the order within a slot depends on milliseconds). Claims are therefore only
asked for whole slots: the test reads which records are due and rounds every claim
limit up to the end of a slot, then compares the claimed ids as sets, mapping each
claim of one ledger to the other's by request id.
"""

from __future__ import annotations

from typing import Any

from django_ledger import (
    Admission,
    AdmissionStatus,
    Claim,
    CorruptRecord,
    Ledger,
    Record,
    Settlement,
    State,
)
from django_ledger.core.records import decode_record

UNIT = 60_000  # ms: every duration in the test is a whole number of these
HALF = UNIT // 2
IDS = [f"r{i:02d}" for i in range(20)]  # more than max_records: FULL happens


class PairViews:
    """The views of an optimized and a reference ledger that must agree."""

    opt: Ledger
    ledgers: tuple[Ledger, Ledger]
    t0: int
    skew: int
    gate: bool
    claims: list[tuple[Claim, Claim]]
    canon: tuple[dict[tuple[str, int], Any], dict[tuple[str, int], Any]]
    top_fence: list[int]

    # -- views that must agree -------------------------------------------------------

    def slot(self, ms: int | None) -> int | None:
        return None if ms is None else (ms - self.t0) // HALF

    def fence_view(self, request_id: str, fence: int, side: int) -> Any:
        return self.canon[side].get((request_id, fence), fence)

    def record_view(self, record: Record | None, side: int) -> tuple[Any, ...] | None:
        if record is None:
            return None
        return (
            record.request_id,
            record.state,
            record.attempts,
            self.fence_view(record.request_id, record.fence, side),
            record.owner,
            record.payload,
            record.traceparent,
            record.priority,
            self.slot(record.due_at),
            self.slot(record.lease_until),
            self.slot(record.created_at),
            self.slot(record.updated_at),
        )

    def admission_view(self, admission: Admission, side: int) -> tuple[Any, ...]:
        return (
            admission.request_id,
            admission.status,
            admission.reason,
            self.record_view(admission.record, side),
        )

    def claim_view(self, claim: Claim | None, side: int) -> tuple[Any, ...] | None:
        if claim is None:
            return None
        return (
            claim.request_id,
            claim.payload,
            claim.owner,
            claim.attempt,
            self.fence_view(claim.request_id, claim.fence, side),
            self.slot(claim.lease_until),
            claim.traceparent,
        )

    def settlement_view(self, settlement: Settlement, side: int) -> tuple[Any, ...]:
        return (
            settlement.status,
            settlement.reason,
            self.record_view(settlement.record, side),
        )

    def identities(self, ledger: Ledger) -> list[Record | str | None]:
        """Every id of the pool: its record, "corrupt" or "quarantined", or None."""
        out: list[Record | str | None] = []
        raws = ledger.redis.hmget(ledger.records_key, IDS)
        quarantined = ledger.redis.hmget(ledger.quarantine_key, IDS)
        for request_id, raw, aside in zip(IDS, raws, quarantined, strict=True):
            try:
                out.append(None if raw is None else ledger.resolve(request_id))
            except CorruptRecord:
                out.append("quarantined" if aside == raw else "corrupt")
        return out

    def identity_view(self, identity: Record | str | None, side: int) -> Any:
        if not isinstance(identity, Record):
            return identity
        return self.record_view(identity, side)

    # -- what the ledgers should claim -----------------------------------------------

    def due_slots(self) -> list[tuple[tuple[int, int], str]]:
        """((-priority, due slot), id) of every PENDING record due now, in claim order."""
        now_slot = self.skew // HALF
        due = []
        quarantined = self.opt.redis.hkeys(self.opt.quarantine_key)
        for record in self.identities(self.opt):
            if (
                isinstance(record, Record)
                and record.state is State.PENDING
                # Put right by hand after quarantine: unindexed until repair restores it.
                and record.request_id.encode() not in quarantined
            ):
                due_slot = self.slot(record.due_at)
                assert due_slot is not None
                if due_slot <= now_slot:
                    due.append(((-record.priority, due_slot), record.request_id))
        return sorted(due)

    def whole_slots(self, limit: int) -> tuple[int, set[str]]:
        """Round ``limit`` up to the end of a slot; return it and the ids it claims."""
        due = self.due_slots()
        if limit < len(due):
            last = due[limit - 1][0]
            limit = sum(1 for due_slot, _ in due if due_slot <= last)
        expected = set() if self.gate else {request_id for _, request_id in due[:limit]}
        return limit, expected

    def record_claims(self, opt: list[Claim], ref: list[Claim], expected: set[str]) -> None:
        by_id = {claim.request_id: claim for claim in ref}
        assert {claim.request_id for claim in opt} == expected
        assert set(by_id) == expected
        assert len(opt) == len(ref) == len(expected)
        for side, claims in enumerate((opt, ref)):
            # Each claim's fence is new: above every fence its queue gave before.
            fences = sorted(claim.fence for claim in claims)
            assert len(set(fences)) == len(fences)
            assert not fences or fences[0] > self.top_fence[side]
            self.top_fence[side] = max([self.top_fence[side], *fences])
        for claim in sorted(opt, key=lambda claim: claim.request_id):
            pair = (claim, by_id[claim.request_id])
            given = ("claim", len(self.claims))
            for side, one in enumerate(pair):
                self.canon[side][(one.request_id, one.fence)] = given
            assert self.claim_view(pair[0], 0) == self.claim_view(pair[1], 1)
            self.claims.append(pair)


def tick(ledger: Ledger) -> None:
    """Move ``ledger``'s clock on a millisecond: its next call comes after its last."""
    ledger.clock_skew_ms += 1


def without_fence(view: tuple[Any, ...]) -> tuple[Any, ...]:
    """An import's admission view as if the given fence were the stored one."""
    request_id, status, reason, record = view
    if status is AdmissionStatus.CONFLICT and reason.startswith("differs:"):
        fields = [name for name in reason.removeprefix("differs:").split(",") if name != "fence"]
        if not fields:
            return (request_id, AdmissionStatus.DUPLICATE, None, record)
        reason = "differs:" + ",".join(fields)
    return (request_id, status, reason, record)


def index_entries(ledger: Ledger) -> dict[str, dict[str, int]]:
    """Every index of ``ledger`` as {index name: {id: score}}."""
    names = {
        "ready": ledger.ready_key,
        "leases": ledger.leases_key,
        **{state.value: key for state, key in ledger.terminal_keys.items()},
    }
    pipe = ledger.redis.pipeline(transaction=False)
    for key in names.values():
        pipe.zrange(key, 0, -1, withscores=True)
    replies = pipe.execute()
    return {
        name: {member.decode(): int(score) for member, score in reply}
        for name, reply in zip(names, replies, strict=True)
    }


def expected_index_entries(ledger: Ledger) -> dict[str, dict[str, int]]:
    """The indexes derived from ``ledger``'s records."""
    expected: dict[str, dict[str, int]] = {
        "ready": {},
        "leases": {},
        **{state.value: {} for state in ledger.terminal_keys},
    }
    raws = ledger.redis.hgetall(ledger.records_key)
    for key, raw in sorted(raws.items()):
        try:
            record = decode_record(key.decode(), raw)
        except CorruptRecord:
            # Still indexed until repair quarantines it; unindexed after.
            if ledger.redis.hget(ledger.quarantine_key, key) == raw:
                continue
            for name, entries in index_entries(ledger).items():
                if key.decode() in entries:
                    expected[name][key.decode()] = entries[key.decode()]
            continue
        if ledger.redis.hexists(ledger.quarantine_key, key):
            # Quarantined, then its bytes were put right by hand: unindexed until repair
            # or an operator's restore puts it back; whatever the indexes hold stands.
            for name, entries in index_entries(ledger).items():
                if key.decode() in entries:
                    expected[name][key.decode()] = entries[key.decode()]
            continue
        name = {State.PENDING: "ready", State.CLAIMED: "leases"}.get(
            record.state, record.state.value
        )
        score = record.index_score()
        assert score is not None
        expected[name][record.request_id] = score
    return expected
