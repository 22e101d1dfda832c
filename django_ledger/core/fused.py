"""The fused path: each operation a whole transport batch in one script call.

Each function takes the queue's ``Runner`` and a batch already checked by ``Ledger``,
and turns the script's reply into the ledger's answers. The reference path
(``reference.py``) gives the same answers with reads and compare-and-set writes.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from .answers import ADMIT_CODES, admitted, imported, settlements
from .arguments import Work
from .records import Record, decode_record
from .results import Admission, AdmissionStatus, Claim, Claims, Settlement
from .runner import Runner

__all__ = ["admit", "claim", "import_records", "repair", "settle", "settle_and_claim"]


def admit(
    runner: Runner,
    batch: list[tuple[int, str, bytes]],
    delay_ms: int,
    traceparent: str,
    max_records: int,
    priority: int = 0,
    keys: list[str] | None = None,
) -> list[Admission]:
    args: list[Any] = [max_records, delay_ms, traceparent, priority]
    if keys is None:
        for _, request_id, data in batch:
            args += (request_id, data)
    else:
        # A queue with a KEY: '' then triples (admit.lua).
        args.append("")
        for (_, request_id, data), key in zip(batch, keys, strict=True):
            args += (request_id, data, key)
    reply = runner.run(runner.scripts.admit, args)
    now = reply[0]
    trace = traceparent or None
    answers = []
    for i, (_, request_id, data) in enumerate(batch):
        code, detail = reply[1 + 2 * i], reply[2 + 2 * i]
        status, reason = ADMIT_CODES[code]
        if code == 1:
            make = partial(admitted, request_id, data, now, delay_ms, trace, priority)
            answers.append(Admission(request_id, status, make=make, times=(now, now + delay_ms)))
            continue
        found = partial(decode_record, request_id, detail) if detail else None
        answers.append(Admission(request_id, status, reason, make=found))
    return answers


def claim(
    runner: Runner, owner: str, limit: int, lease_ms: int, start: int | None = None
) -> Claims:
    args: list[Any] = [owner, lease_ms, limit]
    if start is not None:
        args.append(start)
    reply = runner.run(runner.scripts.claim, args)
    return claims_of(reply, 2, owner)


def claims_of(reply: list[Any], start: int, owner: str) -> Claims:
    """Read the claims a script appended to its reply from ``start`` on.

    ``reply[0]`` is the server clock and ``reply[1]`` the next due time (-1: none).
    """
    next_at = reply[1]
    claims = Claims(
        [
            Claim(
                reply[i].decode("utf-8"),
                reply[i + 1].decode("utf-8"),
                owner,
                reply[i + 2],
                reply[i + 3],
                reply[i + 4],
                reply[i + 5].decode("ascii") or None,
                reply[i + 6] == 1,
            )
            for i in range(start, len(reply), 7)
        ]
    )
    if next_at >= 0:
        claims.due_in_ms = max(0, next_at - reply[0])
    return claims


def _settle_args(batch: list[Work]) -> list[Any]:
    args: list[Any] = []
    for claim, target, ms, result in batch:
        args += (claim.request_id, claim.owner, claim.fence, target, ms, result)
    return args


def _settlements(batch: list[Work], reply: list[Any], start: int) -> list[Settlement]:
    end = start + 2 * len(batch)
    return settlements(batch, reply[start:end:2], reply[start + 1 : end : 2])


def settle(runner: Runner, batch: list[Work], max_retained: int) -> list[Settlement]:
    reply = runner.run(runner.scripts.settle, [max_retained, *_settle_args(batch)])
    return _settlements(batch, reply, 1)


def settle_and_claim(
    runner: Runner,
    batch: list[Work],
    max_retained: int,
    owner: str,
    limit: int,
    lease_ms: int,
    start: int | None = None,
) -> tuple[list[Settlement], Claims]:
    args = [max_retained, owner, lease_ms, limit, len(batch), *_settle_args(batch)]
    if start is not None:
        args.append(start)
    reply = runner.run(runner.scripts.settle_claim, args)
    return _settlements(batch, reply, 3), claims_of(reply, 3 + 2 * len(batch), owner)


def repair(
    runner: Runner, batch: list[tuple[str | bytes, bytes]], retention_ms: int, max_attempts: int
) -> list[int]:
    args: list[Any] = [retention_ms, max_attempts]
    for request_id, raw in batch:
        args += (request_id, raw)
    return list(runner.run(runner.scripts.repair, args))


def import_records(
    runner: Runner, batch: list[tuple[Record, bytes, frozenset[str]]], max_records: int
) -> list[Admission]:
    args: list[Any] = [max_records]
    for record, raw, _ in batch:
        args += (record.request_id, raw)
    reply = runner.run(runner.scripts.import_records, args)
    if reply == [-2]:
        return [Admission(r.request_id, AdmissionStatus.REJECTED, "gate_open") for r, _, _ in batch]
    return [
        imported(record, given, reply[2 * i], reply[2 * i + 1])
        for i, (record, _, given) in enumerate(batch)
    ]
