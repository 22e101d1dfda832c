"""Claims on a sharded queue: which shard each call claims from, and settle-and-claim.

Claims visit the shards in turn from a start that moves on each call, so no shard waits
for ever; ``settle_and_claim`` (the worker's) claims from the ledger's home shard, dealt in
turn to the queue's claimers, in the same call as its settlements there, and every
``4 N``-th call from the shard whose turn it is.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from typing import Any

from . import claiming
from .arguments import Work
from .layout import homes_key, shard_index
from .ledger_base import LedgerBase
from .limits import Limits, LimitUse
from .results import Claim, Claims, Settlement, earliest
from .surface import LedgerSurface

__all__ = ["ShardedClaiming"]


class ShardedClaiming(LedgerSurface):
    """Claim from a sharded queue's shards in turn (``ShardedLedger`` sets the state)."""

    namespace: str
    queue: str
    shard_count: int
    _rotate_every: int
    _turn: itertools.count[int]
    _home: int | None
    _away: bool

    def limits(self) -> LimitUse:
        """No limits: a limited queue has one shard (docs/limits.md)."""
        return LimitUse(Limits(), None, None, 0)

    def set_limits(self, limits: Limits, *, source: str = "operator", force: bool = True) -> bool:
        """Refuse: a limit is held by one server's clock and counts, so one shard."""
        if limits:
            raise ValueError(
                f"{self.namespace}:{self.queue} has {self.shard_count} shards: "
                "a queue with limits has one shard (see 'Flow limits' in the django-ledger docs)"
            )
        return False

    def _rotation(self) -> list[LedgerBase]:
        """The shards in claim order for this call: from the one whose turn it is."""
        start = next(self._turn) % self.shard_count
        shards = self._laid_out()
        return list(shards[start:] + shards[:start])

    def _claim(self, owner: str, limit: int, lease_ms: int, hold_after: int | None) -> Claims:
        """Claim from the shards in turn, from the one whose turn it is, up to ``limit``."""
        return _fill(Claims(), self._rotation(), owner, limit, lease_ms, hold_after)

    def _settle_and_claim(
        self, work: list[Work], owner: str, limit: int, lease_ms: int, hold_after: int | None
    ) -> tuple[list[Settlement], Claims]:
        """Settle ``work``, then claim up to ``limit``: one call when it is one shard's.

        The claims come first from this ledger's home shard (``_claiming_shard``): the
        workers of a queue take different homes, and each keeps to its own while it has
        work, in the same script call as its settlements there; every ``4 N``-th call
        they come from the shard whose turn it is, so every shard is visited. When the
        first shard has fewer than ``limit``, the others fill up, from a random one on.
        """
        shards = self._laid_out()
        count = self.shard_count
        groups: dict[int, list[int]] = {}
        for position, (claim, _, _, _) in enumerate(work):
            groups.setdefault(shard_index(claim.request_id, count), []).append(position)
        fused = self._claiming_shard(groups)
        settlements: list[Any]
        claims: Claims
        if len(groups) == 1 and fused in groups:  # the common case: one shard, one call
            settlements, claims = claiming.settle_and_claim(
                shards[fused], work, owner, limit, lease_ms, hold_after
            )
        else:
            settlements, claims = [None] * len(work), Claims()
            for index in [*(i for i in groups if i != fused), fused]:
                positions = groups.get(index, [])
                group = [work[p] for p in positions]
                if index == fused:
                    got, claims = claiming.settle_and_claim(
                        shards[index], group, owner, limit, lease_ms, hold_after
                    )
                else:
                    got = claiming.settle_batch(shards[index], group)
                for position, answer in zip(positions, got, strict=True):
                    settlements[position] = answer
        if limit and fused == self._home:
            self._away = len(claims) < limit  # the home ran short: keep to where work is
        if limit and len(claims) < limit:
            start = random.randrange(count)  # not fused + 1: workers would move as a herd
            rest = [
                shards[(start + s) % count] for s in range(count) if (start + s) % count != fused
            ]
            claims = _fill(claims, rest, owner, limit, lease_ms, hold_after)
        return settlements, claims

    def _claiming_shard(self, groups: dict[int, list[int]]) -> int:
        """The shard ``settle_and_claim`` claims from first (in the call that settles it).

        Its home, where the worker keeps while the home has work, so that the workers of
        one queue each drain their own shard (their own master); every ``4 N``-th call
        the shard whose turn it is, so that every shard is visited. A call that has just
        settled elsewhere (after a visit) goes home again, for one more call; once the
        home has run short, the worker keeps to the shard it settles on until its next
        visit.
        """
        turn = next(self._turn)
        count = self.shard_count
        home = self._home_shard()
        if turn % self._rotate_every == 0:
            self._away = False
            return turn // self._rotate_every % count  # the shard whose turn it is
        if not groups:
            return turn % count if self._away else home
        last = next(reversed(groups))  # the shard of the last settlement
        return last if self._away else home

    def _home_shard(self) -> int:
        """This ledger's home shard, taken in turn from a counter of the queue's claimers.

        One ``INCR`` (under shard 0's tag) the first time, so that workers started
        together get different homes, ``N`` workers all ``N`` shards.
        """
        if self._home is None:
            first = self._laid_out()[0]
            with first.translate_errors():
                taken = int(first.redis.incr(homes_key(self.namespace, self.queue)))
            self._home = (taken - 1) % self.shard_count
        return self._home


def _fill(
    claims: Claims,
    shards: Iterable[LedgerBase],
    owner: str,
    limit: int,
    lease_ms: int,
    hold_after: int | None,
) -> Claims:
    """Add claims from ``shards`` in order until ``limit``; then nothing is known of the
    next due time (``None``), else (every shard asked) it is the soonest of theirs."""
    waits = [claims.due_in_ms]
    for shard in shards:
        wanted = _still(hold_after, claims)
        more = claiming.claim_many(shard, owner, limit - len(claims), lease_ms, wanted)
        claims += more
        waits.append(more.due_in_ms)
        if len(claims) >= limit:
            claims.due_in_ms = None
            return claims
    claims.due_in_ms = earliest(*waits)
    return claims


def _still(hold_after: int | None, claims: list[Claim]) -> int | None:
    """How many more claims start at once, once ``claims`` are made (``None``: all)."""
    return None if hold_after is None else max(0, hold_after - len(claims))
