"""Claims and settlements: claim, renew, settle, release, settle-and-claim."""

from __future__ import annotations

from collections.abc import Iterable

from . import fused, reference, reference_claims
from .arguments import (
    RenewItem,
    SettleItem,
    Work,
    check_claim,
    positive_int,
    renew_work,
    settle_work,
    work_size,
)
from .ledger_base import LedgerBase
from .limits import Limits, store_key_limits, store_limits
from .records import owner_problem
from .results import Claim, Claims, Settlement, SettlementStatus
from .timing import duration_ms
from .transport import MAX_BATCH, batches

__all__ = [
    "claim_arguments",
    "claim_many",
    "release",
    "renew_many",
    "renewed",
    "set_key_limits",
    "set_limits",
    "settle_and_claim",
    "settle_batch",
    "settle_many",
]


def renewed(work: list[Work], settlements: list[Settlement]) -> list[Settlement]:
    """Move each renewed claim's lease on, and mark a claim marked started as not held."""
    for (claim, target, _, _), answer in zip(work, settlements, strict=True):
        if target in ("C", "S") and answer.status is SettlementStatus.RENEWED:
            record = answer.record
            if record is not None:
                claim.lease_until = record.lease_until or claim.lease_until
            if target == "S":
                claim.held = False
    return settlements


def claim_arguments(
    owner: object, limit: object, lease: object, hold_after: object, *, settling: bool = False
) -> int:
    """Check a claim's arguments and return the lease in milliseconds.

    ``limit`` is 1 or more, or with ``settling`` (``settle_and_claim``) 0 to ``MAX_BATCH``.
    """
    problem = owner_problem(owner)
    if problem is not None:
        raise ValueError(f"owner is not usable ({problem})")
    if not settling:
        positive_int(limit, "limit")
    elif isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_BATCH:
        raise ValueError(f"limit must be an int from 0 to {MAX_BATCH}, got {limit!r}")
    lease_ms = duration_ms(lease, "lease", positive=True)
    # ``hold_after``: ``None``, or an int of 0 or more.
    if isinstance(hold_after, bool) or not isinstance(hold_after, int | None):
        raise TypeError(f"hold_after must be an int or None, not {type(hold_after).__name__}")
    if hold_after is not None and hold_after < 0:
        raise ValueError(f"hold_after must be 0 or more, got {hold_after}")
    return lease_ms


def claim_many(
    ledger: LedgerBase, owner: str, limit: int, lease_ms: int, hold_after: int | None
) -> Claims:
    """Claim up to ``limit`` due records, one round trip per batch of 128.

    The arguments checked (``claim_arguments``). ``hold_after``: the claims after the
    first ``hold_after`` are held (``Claim.held``: claimed, their work not started) until
    a settlement as ``State.CLAIMED`` (or a renewal with ``started``) marks them started;
    repair gives back the attempt of a held claim whose lease runs out. ``None``: every
    claim starts at once.
    """
    claims = Claims()
    while len(claims) < limit:
        want = min(MAX_BATCH, limit - len(claims))
        start = None if hold_after is None else max(0, hold_after - len(claims))
        if ledger.optimized:
            got = fused.claim(ledger.runner, owner, want, lease_ms, start)
        else:
            got = reference_claims.claim(ledger.runner, owner, want, lease_ms, start)
        claims += got
        claims.due_in_ms = got.due_in_ms  # the last batch's answer
        if len(got) < want:
            break
    return claims


def renew_many(ledger: LedgerBase, items: Iterable[RenewItem]) -> list[Settlement]:
    """Renew many claims, one round trip per batch; each renewed Claim's lease moves on.

    Items are ``(claim, lease)``, or ``(claim, lease, started)``: ``started`` true
    also marks a held claim started.
    """
    return settle_batch(ledger, [renew_work(item) for item in items])


def settle_many(ledger: LedgerBase, items: Iterable[SettleItem]) -> list[Settlement]:
    """Settle many claims, one round trip per batch; only a lost item fails.

    Items are ``(claim, state)``, ``(claim, state, delay)`` or ``(claim, state, delay,
    result)``.
    """
    return settle_batch(ledger, [settle_work(item) for item in items])


def release(ledger: LedgerBase, claims: Iterable[Claim]) -> list[Settlement]:
    """Give back claims whose work never started: PENDING, due now, the attempt unspent.

    For a worker that stops with prefetched claims in hand. A compare-and-set like
    every settlement: a claim that no longer holds its record answers ``LOST``.
    """
    work: list[Work] = []
    for claim in claims:
        check_claim(claim)
        work.append((claim, "R", 0, b""))
    return settle_batch(ledger, work)


def settle_and_claim(
    ledger: LedgerBase,
    work: list[Work],
    owner: str,
    limit: int,
    lease_ms: int,
    hold_after: int | None,
) -> tuple[list[Settlement], Claims]:
    """Settle ``work``, then claim up to ``limit`` more for ``owner`` (arguments checked).

    Optimized, the last transport batch of settlements and the claims travel in one
    script call: a worker that has just finished gets its next work in the same round
    trip. ``limit`` may be 0 (settle only). An item ``(claim, State.CLAIMED, lease)``
    marks a held claim started (and renews it); ``hold_after`` as ``claim_many``.
    The claims say when the next PENDING record falls due (``Claims.due_in_ms``).
    """
    if not ledger.optimized:
        settled = settle_batch(ledger, work)
        if not limit:
            return settled, Claims()
        return settled, reference_claims.claim(ledger.runner, owner, limit, lease_ms, hold_after)
    parts = list(batches(work, work_size)) or [[]]
    settlements: list[Settlement] = []
    for part in parts[:-1]:
        settlements += fused.settle(ledger.runner, part, ledger.max_retained)
    last, claims = fused.settle_and_claim(
        ledger.runner, parts[-1], ledger.max_retained, owner, limit, lease_ms, hold_after
    )
    return renewed(work, settlements + last), claims


def set_limits(
    ledger: LedgerBase, limits: Limits, *, source: str = "operator", force: bool = True
) -> bool:
    """Store the queue's flow limits (``Limits()``: none); say whether they changed.

    The claim scripts apply them from the next call on, for every worker. ``source``
    ``"settings"`` with ``force`` false leaves limits an operator stored alone. Fused
    path only: a ledger on the reference path raises ``FusedPathOnly``.
    """
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a Limits, got {limits!r}")
    ledger.fused_only("flow limits")
    written = store_limits(ledger.runner, limits, source, force=force)
    # The KEY is the settings' alone (an operator changes the numbers): admissions
    # from this ledger compute it from now on.
    ledger.limit_key = limits.key
    return written


def set_key_limits(
    ledger: LedgerBase,
    key: str,
    limits: Limits | None,
    *,
    source: str = "operator",
    force: bool = True,
) -> bool:
    """Store ``key``'s limits of their own in a queue with a KEY (``None``: remove them,
    the key claims under the queue's limits again); say whether they changed.

    A rate or a concurrency set replaces the queue's for that key; a part not set is
    the queue's. ``source`` ``"settings"`` with ``force`` false leaves an operator's.
    Fused path only, as ``set_limits``.
    """
    ledger.fused_only("a key's flow limits")
    return store_key_limits(ledger.runner, key, limits, source, force=force)


def settle_batch(ledger: LedgerBase, work: list[Work]) -> list[Settlement]:
    results: list[Settlement] = []
    for batch in batches(work, work_size):
        if ledger.optimized:
            results += fused.settle(ledger.runner, batch, ledger.max_retained)
        else:
            results += reference.settle_many(ledger.runner, batch, max_retained=ledger.max_retained)
    return renewed(work, results)
