"""The reference path: every operation as reads plus the generic compare-and-set write.

This is the design of the reference ledger: the client reads the record, decides in
Python, and asks ``write.lua`` to replace the exact bytes it read, checking the time
conditions with the server clock in the same atomic step. It makes more round trips
than the fused scripts and exists to hold them to the same answers. It keeps to the
reference ledger's contract: admission, settlement, repair and import here, claims in
``reference_claims.py``; workflows and flow limits run on the fused path only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .answers import imported
from .errors import CorruptRecord
from .history import lost_result
from .records import Record, State, decode_record, encode_record
from .results import Admission, AdmissionStatus, Claim, Settlement, SettlementStatus
from .runner import Runner

__all__ = ["admit", "import_one", "repair", "settle_many", "trim_ended", "write"]

_STATE_OF = {"K": State.COMPLETED, "F": State.FAILED, "P": State.PENDING, "C": State.CLAIMED}
_RETRIES = 8


def write(
    runner: Runner,
    request_id: str,
    expected: bytes,
    new: bytes,
    record: Record | None,
    *,
    deadline: int | None = None,
    not_before: int | None = None,
    max_records: int | None = None,
    gate: str = "",
    max_retained: int | None = None,
    result: bytes = b"",
) -> int:
    """Replace the exact bytes ``expected`` (b"" = absent) by ``new`` (b"" = delete).

    The one compare-and-set write of the reference path and of operator actions: the
    record goes first, then the index its state calls for; time and gate conditions
    are checked with the server clock in the same step; ``result`` is stored with the
    record, and a terminal write purges the oldest ended records past ``max_retained``.
    Answer ``write.lua``'s code.
    """
    ready = lease = letter = score = ""
    if record is not None:
        if record.state is State.PENDING:
            ready = str(record.index_score())
        elif record.state is State.CLAIMED:
            lease = str(record.lease_until)
        else:
            letter, score = record.state.letter.decode(), str(record.updated_at)
    args = [
        request_id,
        expected,
        new,
        ready,
        lease,
        letter,
        score,
        "" if deadline is None else deadline,
        "" if not_before is None else not_before,
        "" if max_records is None else max_records,
        gate,
        "" if max_retained is None else max_retained,
        result,
    ]
    return int(runner.run(runner.scripts.write, args))


def admit(
    runner: Runner,
    request_id: str,
    data: bytes,
    delay_ms: int,
    traceparent: str,
    max_records: int,
    priority: int = 0,
) -> Admission:
    payload = data.decode("utf-8")
    for _ in range(_RETRIES):
        now, raw = runner.now_and_raw(request_id)
        if raw is not None:
            return _classify(runner, request_id, payload, raw)
        record = Record(
            request_id,
            payload,
            State.PENDING,
            now + delay_ms,
            created_at=now,
            updated_at=now,
            traceparent=traceparent or None,
            priority=priority,
        )
        code = write(
            runner, request_id, b"", encode_record(record), record, max_records=max_records
        )
        if code == 1:
            return Admission(request_id, AdmissionStatus.ADMITTED, None, record)
        if code == -1:
            return Admission(request_id, AdmissionStatus.FULL, "max_records")
        if code == -3:  # a workflow's waiting step holds the id
            return Admission(request_id, AdmissionStatus.CONFLICT, "workflow_step")
        # Someone wrote this id between our read and our write: classify what is there.
    raise RuntimeError(f"admission of {request_id!r} kept racing")  # pragma: no cover


def _classify(runner: Runner, request_id: str, payload: str, raw: bytes) -> Admission:
    try:
        existing = decode_record(request_id, raw)
    except CorruptRecord:
        with runner.translate_errors():
            quarantined = runner.redis.hexists(runner.keys.quarantine, request_id)
        reason = "quarantined" if quarantined else "corrupt"
        return Admission(request_id, AdmissionStatus.CONFLICT, reason)
    if existing.payload == payload:
        return Admission(request_id, AdmissionStatus.DUPLICATE, None, existing)
    return Admission(request_id, AdmissionStatus.CONFLICT, "payload_differs", existing)


def settle_many(
    runner: Runner, batch: list[tuple[Claim, str, int, bytes]], *, max_retained: int
) -> list[Settlement]:
    """Settle a transport batch as ``settle.lua`` does: every item judged at the batch's
    one instant (the records it ends end together, so both modes agree on which ended
    records are the oldest), each answered before the batch purges the oldest ended
    records past ``max_retained``, a few more than it ended."""
    at = runner.server_time_ms()
    answers: list[Settlement] = []
    ended = 0
    for claim, target, ms, result in batch:
        answer, written = _settle(runner, claim, target, ms, result, at)
        answers.append(answer)
        if written and answer.record is not None and answer.record.state.terminal:
            ended += 1
    if ended:
        trim_ended(runner, max_retained, ended + 16)
    return answers


def trim_ended(runner: Runner, max_retained: int, budget: int) -> int:
    """Purge the oldest ended records past ``max_retained``, looking at most at ``budget``
    index entries; answer how many records went. ``write.lua`` called with no id: the
    same ``trim_ended`` (indexes.lua) as the fused path's, ties and all."""
    args = ["", "", "", "", "", "", budget, "", "", "", "", max_retained, ""]
    return int(runner.run(runner.scripts.write, args))


def _settle(
    runner: Runner, claim: Claim, target: str, ms: int, result: bytes, at: int
) -> tuple[Settlement, bool]:
    """Settle one item at the batch's instant ``at``; answer it and whether it wrote."""
    for attempt in range(_RETRIES):
        clock, raw = runner.now_and_raw(claim.request_id)
        # A retry (the record or the clock moved under the write) is judged afresh.
        now = at if attempt == 0 else clock
        if raw is None:
            return Settlement(SettlementStatus.LOST, None, "missing"), False
        try:
            record = decode_record(claim.request_id, raw)
        except CorruptRecord:
            return Settlement(SettlementStatus.LOST, None, "corrupt"), False
        if record.fence != claim.fence or record.owner != claim.owner:
            return Settlement(SettlementStatus.LOST, None, "superseded"), False
        if record.state is not State.CLAIMED:
            if target in ("K", "F") and record.state is _STATE_OF[target]:
                return Settlement(SettlementStatus.SETTLED, record), False
            return Settlement(SettlementStatus.LOST, None, "not_claimed"), False
        lease_until = record.lease_until or 0
        if now >= lease_until:
            return Settlement(SettlementStatus.LOST, None, "lease_expired"), False
        if target == "C":
            # A plain renewal keeps updated_at: a CLAIMED record's updated_at is when its
            # attempt started (a held claim's start is when it is marked started, below).
            new = replace(record, lease_until=now + ms)
        elif target == "S":
            new = replace(record, lease_until=now + ms, updated_at=now, held=False)
        else:  # it ends, or goes back PENDING: due after its delay, or (R) now, unspent
            back, given = target in ("P", "R"), target == "R"
            new = replace(
                record,
                state=State.PENDING if back else State.COMPLETED if target == "K" else State.FAILED,
                lease_until=None,
                due_at=(now if given else now + ms) if back else record.due_at,
                attempts=record.attempts - 1 if given else record.attempts,
                updated_at=now,
                held=False,
            )
        written = write(
            runner,
            claim.request_id,
            raw,
            encode_record(new),
            new,
            deadline=lease_until,
            result=result,
        )
        if written == 1:
            renewal = target in ("C", "S")
            status = SettlementStatus.RENEWED if renewal else SettlementStatus.SETTLED
            return Settlement(status, new), True
        # The record or the clock moved under us: look again and answer from what is there.
    return Settlement(SettlementStatus.LOST, None, "contended"), False  # pragma: no cover


def repair(
    runner: Runner,
    batch: list[tuple[str | bytes, bytes]],
    retention_ms: int,
    max_attempts: int,
) -> list[int]:
    """Repair each (id, observed bytes) pair; answer the codes ``repair.lua`` answers."""
    now = runner.server_time_ms()
    codes = []
    for request_id, raw in batch:
        try:
            if isinstance(request_id, bytes):  # an id that is not UTF-8 was never ours
                raise CorruptRecord(repr(request_id), "request id is not UTF-8")
            record = decode_record(request_id, raw)
        except CorruptRecord:
            code = int(runner.run(runner.scripts.quarantine, [request_id, raw]))
            codes.append({0: 0, 1: 1, 2: 5}[code])
            continue
        lease_until = record.lease_until
        if record.state is State.CLAIMED and lease_until is not None and now >= lease_until:
            ended: dict[str, Any] = {"lease_until": None, "updated_at": now}
            if record.held:  # it never started: the attempt is given back (repair.lua)
                given: dict[str, Any] = {
                    "attempts": record.attempts - 1,
                    "held": False,
                    "given_back": True,
                }
                new = replace(record, state=State.PENDING, due_at=now, **ended, **given)
            elif record.attempts >= max_attempts:
                new = replace(record, state=State.DEAD, **ended)
            else:
                new = replace(record, state=State.PENDING, due_at=now, **ended)
            # A started attempt is lost: recorded in its result document (as repair.lua).
            lost = b"" if record.held else lost_result(runner, record)
            new_raw = encode_record(new)
            written = write(
                runner, request_id, raw, new_raw, new, not_before=lease_until, result=lost
            )
            codes.append((4 if new.state is State.DEAD else 3) if written == 1 else 0)
        elif record.state.terminal and record.updated_at + retention_ms <= now:
            deadline = record.updated_at + retention_ms
            written = write(runner, request_id, raw, b"", None, not_before=deadline)
            codes.append(6 if written == 1 else 0)
        else:
            args: list[Any] = [request_id, raw, record.state.letter, record.index_score()]
            codes.append(int(runner.run(runner.scripts.reindex, args)))
    return codes


def import_one(
    runner: Runner, record: Record, raw: bytes, given: frozenset[str], max_records: int
) -> Admission:
    live = not record.state.terminal  # only live records make a queue full
    code = write(
        runner,
        record.request_id,
        b"",
        raw,
        record,
        max_records=max_records if live else None,
        gate="closed",
    )
    if code == -2:
        return Admission(record.request_id, AdmissionStatus.REJECTED, "gate_open")
    if code == -3:
        return imported(record, given, 7, b"")
    if code == 0:
        with runner.translate_errors():
            stored = runner.redis.hget(runner.keys.records, record.request_id)
        if stored is None:  # pragma: no cover - purged between the two calls
            return Admission(record.request_id, AdmissionStatus.CONFLICT, "contended")
        return imported(record, given, 2, stored)
    return imported(record, given, 1 if code == 1 else 4, b"")
