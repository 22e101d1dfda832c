"""Claims and settlements: claim, renew, settle, release, settle-and-claim."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from . import fused, reference
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
from .limits import Limits, LimitUse, read_limits, store_key_limits, store_limits, unhold
from .records import State, owner_problem
from .results import Claim, Claims, Settlement, SettlementStatus
from .timing import duration_ms
from .transport import MAX_BATCH, batches

__all__ = ["Claiming", "check_hold_after", "renewed"]


def check_hold_after(hold_after: object) -> None:
    """Refuse a ``hold_after`` that is not ``None`` or an int of 0 or more."""
    if hold_after is None:
        return
    if isinstance(hold_after, bool) or not isinstance(hold_after, int):
        raise TypeError(f"hold_after must be an int or None, not {type(hold_after).__name__}")
    if hold_after < 0:
        raise ValueError(f"hold_after must be 0 or more, got {hold_after}")


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


class Claiming(LedgerBase):
    """A ledger's claims and their settlements, a transport batch per script call."""

    def claim(self, owner: str, lease: timedelta | float = 30) -> Claim | None:
        """Claim the earliest-due PENDING record for ``owner``, or ``None``."""
        claims = self.claim_many(owner, 1, lease)
        return claims[0] if claims else None

    def claim_many(
        self,
        owner: str,
        limit: int,
        lease: timedelta | float = 30,
        *,
        hold_after: int | None = None,
    ) -> Claims:
        """Claim up to ``limit`` due records, one round trip per batch of 128.

        ``hold_after``: the claims after the first ``hold_after`` are held (``Claim.held``:
        claimed, their work not started) until a settlement as ``State.CLAIMED`` (or a
        renewal with ``started``) marks them started; repair gives back the attempt of a
        held claim whose lease runs out. ``None``: every claim starts at once.
        """
        problem = owner_problem(owner)
        if problem is not None:
            raise ValueError(f"owner is not usable ({problem})")
        positive_int(limit, "limit")
        lease_ms = duration_ms(lease, "lease", positive=True)
        check_hold_after(hold_after)
        claims = Claims()
        while len(claims) < limit:
            want = min(MAX_BATCH, limit - len(claims))
            start = None if hold_after is None else max(0, hold_after - len(claims))
            if self.optimized:
                got = fused.claim(self.runner, owner, want, lease_ms, start)
            else:
                got = reference.claim(self.runner, owner, want, lease_ms, start)
            claims += got
            claims.due_in_ms = got.due_in_ms  # the last batch's answer
            if len(got) < want:
                break
        return claims

    def renew(self, claim: Claim, lease: timedelta | float = 30) -> Settlement:
        """Extend ``claim``'s lease to now + ``lease`` if it still holds the record."""
        return self.renew_many([(claim, lease)])[0]

    def renew_many(self, items: Iterable[RenewItem]) -> list[Settlement]:
        """Renew many claims, one round trip per batch; each renewed Claim's lease moves on.

        Items are ``(claim, lease)``, or ``(claim, lease, started)``: ``started`` true
        also marks a held claim started.
        """
        work = [renew_work(item) for item in items]
        return self._settle_batch(work)

    def settle(
        self,
        claim: Claim,
        state: State = State.COMPLETED,
        delay: timedelta | float = 0,
        result: str | bytes | None = None,
    ) -> Settlement:
        """End ``claim`` as COMPLETED or FAILED, or give it back as PENDING after ``delay``.

        ``result`` (text or bytes) is stored under the request id in the same script call
        as the settlement, and only if the settlement is applied; ``results`` reads it.
        """
        return self.settle_many([(claim, state, delay, result)])[0]

    def settle_many(self, items: Iterable[SettleItem]) -> list[Settlement]:
        """Settle many claims, one round trip per batch; only a lost item fails.

        Items are ``(claim, state)``, ``(claim, state, delay)`` or ``(claim, state, delay,
        result)``.
        """
        return self._settle_batch([settle_work(item) for item in items])

    def release(self, claims: Iterable[Claim]) -> list[Settlement]:
        """Give back claims whose work never started: PENDING, due now, the attempt unspent.

        For a worker that stops with prefetched claims in hand. A compare-and-set like
        every settlement: a claim that no longer holds its record answers ``LOST``.
        """
        work: list[Work] = []
        for claim in claims:
            check_claim(claim)
            work.append((claim, "R", 0, b""))
        return self._settle_batch(work)

    def settle_and_claim(
        self,
        items: Iterable[SettleItem],
        owner: str,
        limit: int,
        lease: timedelta | float = 30,
        *,
        hold_after: int | None = None,
    ) -> tuple[list[Settlement], Claims]:
        """Settle ``items``, then claim up to ``limit`` more for ``owner``.

        Optimized, the last transport batch of settlements and the claims travel in one
        script call: a worker that has just finished gets its next work in the same round
        trip. ``limit`` may be 0 (settle only). An item ``(claim, State.CLAIMED, lease)``
        marks a held claim started (and renews it); ``hold_after`` as ``claim_many``.
        The claims say when the next PENDING record falls due (``Claims.due_in_ms``).
        """
        work = [settle_work(item) for item in items]
        problem = owner_problem(owner)
        if problem is not None:
            raise ValueError(f"owner is not usable ({problem})")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_BATCH:
            raise ValueError(f"limit must be an int from 0 to {MAX_BATCH}, got {limit!r}")
        lease_ms = duration_ms(lease, "lease", positive=True)
        check_hold_after(hold_after)
        if not self.optimized:
            settled = self._settle_batch(work)
            with self.translate_errors():
                limited = self.redis.exists(self.runner.keys.limits)
            if limited:
                # Held claims started or ended: a rate stops counting them (settle_claim.lua).
                done = zip(work, settled, strict=True)
                unhold(
                    self.runner,
                    [
                        item[0].request_id
                        for item, settlement in done
                        if item[1] != "C" and settlement.status is not SettlementStatus.LOST
                    ],
                )
            if not limit and not limited:
                # Under limits a claim of none passes a wake-up on (a slot may be free now).
                return settled, Claims()
            return settled, reference.claim(self.runner, owner, limit, lease_ms, hold_after)
        parts = list(batches(work, work_size)) or [[]]
        settlements: list[Settlement] = []
        for part in parts[:-1]:
            settlements += fused.settle(self.runner, part, self.max_retained)
        last, claims = fused.settle_and_claim(
            self.runner, parts[-1], self.max_retained, owner, limit, lease_ms, hold_after
        )
        return renewed(work, settlements + last), claims

    def limits(self) -> LimitUse:
        """The queue's flow limits as stored in Redis, and their use now (docs/limits.md)."""
        return read_limits(self.runner)

    def set_limits(self, limits: Limits, *, source: str = "operator", force: bool = True) -> bool:
        """Store the queue's flow limits (``Limits()``: none); say whether they changed.

        The claim scripts apply them from the next call on, for every worker. ``source``
        ``"settings"`` with ``force`` false leaves limits an operator stored alone.
        """
        if not isinstance(limits, Limits):
            raise TypeError(f"limits must be a Limits, got {limits!r}")
        written = store_limits(self.runner, limits, source, force=force)
        # The KEY is the settings' alone (an operator changes the numbers): admissions
        # from this ledger compute it from now on.
        self.limit_key = limits.key
        return written

    def set_key_limits(
        self, key: str, limits: Limits | None, *, source: str = "operator", force: bool = True
    ) -> bool:
        """Store ``key``'s limits of their own in a queue with a KEY (``None``: remove them,
        the key claims under the queue's limits again); say whether they changed.

        A rate or a concurrency set replaces the queue's for that key; a part not set is
        the queue's. ``source`` ``"settings"`` with ``force`` false leaves an operator's.
        """
        return store_key_limits(self.runner, key, limits, source, force=force)

    def wake_keys(self) -> list[tuple[Any, str]]:
        """The client and key an idle worker blocks on for this queue (docs/worker.md)."""
        return [(self.runner.redis, self.runner.keys.wake)]

    def _settle_batch(self, work: list[Work]) -> list[Settlement]:
        results: list[Settlement] = []
        for batch in batches(work, work_size):
            if self.optimized:
                results += fused.settle(self.runner, batch, self.max_retained)
            else:
                results += reference.settle_many(self.runner, batch, max_retained=self.max_retained)
        return renewed(work, results)
