"""The demo: an admin user, and a queue with a record in every state.

Seeding never touches a record the demo did not make. The lifecycle runs for real
(admit, claim, renew, settle, expire, repair) in a staging queue of the demo's own, made
for the one call and deleted after it, so a claim can only take what the demo admitted
there. Each resulting record then goes into the target queue by an insert-only
compare-and-set (``write.lua`` with "must be absent"), which never writes over an id
that is already there, the demo's or anyone's. A queue that holds any of the demo's ids
was seeded before and is left as it is: seeding happens once. A sharded queue is
seeded the same way, each id on the shard that holds it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from django_ledger.core.errors import CorruptRecord
from django_ledger.core.ledger import Ledger
from django_ledger.core.records import Record, State, decode_record, encode_record
from django_ledger.core.reference import write
from django_ledger.core.results import AdmissionStatus, Claim

__all__ = [
    "STEPS",
    "DemoRecord",
    "DemoSeed",
    "demo_ids",
    "ensure_admin",
    "kept_password",
    "read_demo",
    "seed_demo",
]

WORKER = "demo-worker"
#: What seeding makes, in order; the record of step ``s`` is ``demo-s``.
STEPS = (
    "completed",
    "failed",
    "retried",
    "claimed",
    "expired",
    "dead",
    "pending",
    "later",
    "quarantined",
)
PREFIX = "demo-"


def demo_ids() -> list[str]:
    """Return the request ids the demo makes in each queue, in step order."""
    return [PREFIX + step for step in STEPS]


def ensure_admin(username: str = "admin", password: str | None = None) -> str:
    """Create the superuser ``username``, or reset its password; return the password.

    The password is ``password``, or a new random one when it is ``None``.
    """
    from django.contrib.auth import get_user_model

    if password is None:
        password = secrets.token_urlsafe(12)
    user_model = get_user_model()
    user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
    if user is None:
        user_model._default_manager.db_manager().create_superuser(
            username, email="", password=password
        )
    else:
        user.is_active = user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
    return password


def kept_password(path: Path) -> tuple[str, bool]:
    """Return the password kept in ``path`` and False, or a new one written there and True.

    The file's first line is the password; a missing or empty file gets a new random
    one, written only readable by its owner. Raise ``OSError`` when it cannot be read or
    written.
    """
    if path.exists():
        lines = path.read_text(encoding="utf-8").splitlines()
        if lines and lines[0].strip():
            return lines[0].strip(), False
    password = secrets.token_urlsafe(12)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(password + "\n")
    os.replace(partial, path)  # whole or not at all
    return password, True


@dataclass(frozen=True)
class DemoRecord:
    """One of the demo's ids as the queue holds it now."""

    request_id: str
    #: The record, or ``None`` when its stored bytes do not decode.
    record: Record | None
    quarantined: bool

    @property
    def state(self) -> str:
        if self.record is not None:
            return self.record.state.value
        return "QUARANTINED" if self.quarantined else "CORRUPT"


@dataclass
class DemoSeed:
    """What seeding did to one queue."""

    queue: str
    #: False when the queue held the demo's ids already and was left as it is.
    seeded: bool
    #: The demo's ids the queue holds now, read after seeding.
    records: list[DemoRecord] = field(default_factory=list)


def seed_demo(ledger: Ledger) -> DemoSeed:
    """Put a record in every state into ``ledger``'s queue, once; touch nothing else.

    Raise ``RuntimeError`` when the queue's gate is closed (an operator is working
    offline) or the queue is full.
    """
    if ledger.gate_closed:
        raise RuntimeError(f"queue {ledger.queue!r} has its gate closed; open it to seed")
    existing = read_demo(ledger)
    if existing:
        return DemoSeed(ledger.queue, False, existing)
    staging = Ledger(
        ledger.redis,
        ledger.namespace,
        f"{PREFIX}staging-{secrets.token_hex(6)}",
        max_payload_bytes=ledger.max_payload_bytes,
        max_attempts=ledger.max_attempts,
        retention=ledger.retention,
    )
    try:
        staged = _stage(staging, ledger.queue)
        _insert(ledger, staged)
    finally:
        with staging.translate_errors():
            staging.redis.delete(*staging.keys)
    return DemoSeed(ledger.queue, True, read_demo(ledger))


def read_demo(ledger: Ledger) -> list[DemoRecord]:
    """Return the demo's ids that ``ledger``'s queue holds (as records or quarantined)."""
    ids = demo_ids()
    raws: list[bytes | None] = [None] * len(ids)
    quarantined: list[bytes | None] = [None] * len(ids)
    with ledger.translate_errors():
        # One pipeline of two reads per shard that holds some of the ids (a plain queue: one).
        for shard in ledger.shards:
            positions = [p for p, i in enumerate(ids) if ledger.shard_for(i) is shard]
            if not positions:
                continue
            pipe = shard.redis.pipeline(transaction=False)
            pipe.hmget(shard.records_key, [ids[p] for p in positions])
            pipe.hmget(shard.quarantine_key, [ids[p] for p in positions])
            got, copies = pipe.execute()
            for position, raw, copy in zip(positions, got, copies, strict=True):
                raws[position], quarantined[position] = raw, copy
    found = []
    for request_id, raw, copy in zip(ids, raws, quarantined, strict=True):
        if raw is None and copy is None:
            continue
        record = None
        if raw is not None:
            with contextlib.suppress(CorruptRecord):
                record = decode_record(request_id, raw)
        found.append(DemoRecord(request_id, record, copy is not None))
    return found


def _stage(staging: Ledger, queue: str) -> list[tuple[str, bytes]]:
    """Make every state in ``staging`` (empty, the demo's alone); return (id, bytes) pairs."""
    with staging.translate_errors():
        if staging.redis.exists(*staging.keys):
            raise RuntimeError(f"staging queue {staging.queue!r} is not empty")

    def payload(step: str) -> str:
        return json.dumps({"queue": queue, "step": step, "to": f"{step}@example.com"})

    def admit(step: str, delay: float = 0) -> str:
        request_id = PREFIX + step
        answer = staging.admit(request_id, payload(step), delay=delay)
        if answer.status is not AdmissionStatus.ADMITTED:
            raise RuntimeError(f"staging refused {request_id!r}: {answer.status.value}")
        return request_id

    def claim(step: str, lease: float = 30) -> Claim:
        request_id = admit(step)
        got = staging.claim(WORKER, lease=lease)
        # Nothing else is due in staging, so this is the record just admitted; say so
        # loudly if it ever is not, rather than act on someone else's.
        if got is None or got.request_id != request_id:
            taken = None if got is None else got.request_id
            raise RuntimeError(f"claimed {taken!r} instead of {request_id!r} in staging")
        return got

    staging.settle(claim("completed"), State.COMPLETED)
    staging.settle(claim("failed"), State.FAILED)
    staging.settle(claim("retried"), State.PENDING, delay=300)
    held = claim("claimed", lease=60)
    staging.renew(held, lease=600)
    # Out of attempts: claimed as many times as the queue allows, each lease running out,
    # until repair ends it DEAD. It comes before demo-expired, which repair makes due
    # again about a second from now: a slow machine would otherwise claim it here.
    _exhaust(staging, admit("dead"))
    # A lease that ran out: repair gives it back (PENDING), as it has attempts left.
    _expire(staging, claim("expired", lease=1))
    admit("pending")
    admit("later", delay=3600)
    made = [PREFIX + step for step in STEPS if step != "quarantined"]
    with staging.translate_errors():
        raws = staging.redis.hmget(staging.records_key, made)
    staged = list(zip(made, raws, strict=True))
    garbage = PREFIX + "quarantined"
    staged.append((garbage, _torn(garbage, payload("quarantined"), staging.server_time_ms())))
    return staged


def _insert(ledger: Ledger, staged: list[tuple[str, bytes]]) -> None:
    """Write each record into ``ledger``'s queue only where its id is absent."""
    for request_id, raw in staged:
        shard = ledger.shard_for(request_id)  # a sharded queue: the shard that holds the id
        try:
            record: Record | None = decode_record(request_id, raw)
        except CorruptRecord:
            record = None  # the torn record: stored unindexed, then quarantined by repair
        code = write(
            shard.runner,
            request_id,
            b"",
            raw,
            record,
            max_records=shard.max_records,
            gate="open",
        )
        if code == -1:
            raise RuntimeError(
                f"queue {ledger.queue!r} is full: it holds its MAX_RECORDS ({ledger.max_records:,})"
            )
        if code == -2:
            raise RuntimeError(f"queue {ledger.queue!r} has its gate closed; open it to seed")
        if code == 1 and record is None:
            # A compare-and-set on the bytes just written: only this id moves.
            shard.repair_records([(request_id, raw)])
        # code 0: the id appeared meanwhile; it is not the demo's to overwrite.


def _torn(request_id: str, payload: str, now: int) -> bytes:
    """Return a record's bytes cut off halfway through its payload, as a torn write leaves them."""
    whole = encode_record(
        Record(request_id, payload, State.PENDING, now, created_at=now, updated_at=now)
    )
    return whole[: len(whole) - len(payload) // 2]


def _exhaust(ledger: Ledger, request_id: str) -> None:
    """Claim ``request_id`` ``max_attempts`` times, each lease running out, until it is DEAD.

    The server clock moves on past each lease (a skew of a few milliseconds in all).
    """
    try:
        for _ in range(ledger.max_attempts):
            got = ledger.claim(WORKER, lease=0.001)
            if got is None or got.request_id != request_id:
                taken = None if got is None else got.request_id
                raise RuntimeError(f"claimed {taken!r} instead of {request_id!r} in staging")
            with ledger.translate_errors():
                raw = ledger.redis.hget(ledger.records_key, request_id)
            ledger.clock_skew_ms += got.lease_until - ledger.server_time_ms() + 1
            ledger.repair_records([(request_id, raw)])
    finally:
        ledger.clock_skew_ms = 0
    record = ledger.resolve(request_id)
    if record is None or record.state is not State.DEAD:
        state = None if record is None else record.state.value
        raise RuntimeError(f"{request_id!r} is {state} after {ledger.max_attempts} claims")


def _expire(ledger: Ledger, claim: Claim) -> None:
    """Repair ``claim``'s record as if its lease had run out (the server clock moved on)."""
    with ledger.translate_errors():
        raw = ledger.redis.hget(ledger.records_key, claim.request_id)
    ledger.clock_skew_ms = claim.lease_until - ledger.server_time_ms() + 1
    try:
        ledger.repair_records([(claim.request_id, raw)])
    finally:
        ledger.clock_skew_ms = 0
