"""The reference path's claim under a queue's limits (limits_accounting.lua, keyed_claim.lua).

``reference.claim`` comes here when the queue has limits, and hands in its own claim
steps (``Steps``: no import back, so no cycle): the tokens are taken through
``limits_control.lua`` and the records claimed with ``reference``'s compare-and-set; a queue with
a KEY has its records picked by keyed_claim.lua's own choice (``limits.pick``), so both paths
apply the same per-key limits and turns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from . import limits
from .results import Claim, Claims
from .runner import Runner

__all__ = ["Steps", "claim_limited"]


class Steps(NamedTuple):
    """``reference``'s claim steps: the due records in order, and one record."""

    #: (runner, owner, limit, lease_ms, start) -> the claims, held after ``start``
    claim_due: Callable[[Runner, str, int, int, int | None], Claims]
    #: (runner, request_id, owner, lease_ms, hold) -> the claim, or why not
    claim_one: Callable[[Runner, str, str, int, bool], Claim | str]


def claim_limited(
    runner: Runner, steps: Steps, owner: str, limit: int, lease_ms: int, start: int | None = None
) -> Claims:
    """Claim up to ``limit`` under the queue's limits (limits_accounting.lua's ``claim_limited``).

    The limits' tokens are taken first (``limits_control.lua``'s take) and those not used given
    back after; a concurrency limit is read there, not reserved, so two reference
    claimers at once may pass it by the claims they make meanwhile (docs/limits.md).
    """
    with runner.translate_errors():
        keyed = runner.redis.hexists(runner.keys.limits, "key")
    if keyed:
        return _claim_keyed(runner, steps, owner, limit, lease_ms, start)
    starts = limit if start is None or start > limit else start
    taken, extra = limits.take(runner, limit, start)
    claims = steps.claim_due(runner, owner, taken + extra, lease_ms, taken)
    held = [claim.request_id for claim in claims if claim.held]
    next_at = limits.refund(runner, taken + extra - len(claims), held)
    if next_at is not None and claims.due_in_ms == 0:
        # More is due, and the limits hold it from every worker: as claim_limited does.
        runner.write("DEL", runner.keys.wake)
        now = runner.server_time_ms()
        claims.due_in_ms = None if next_at < 0 else max(0, next_at - now)
    elif claims.due_in_ms == 0 and taken == starts and extra < limit - taken:
        # Only the headroom rule stopped the held claims: another worker may start the
        # rest (the wake key stays); this caller waits for a thread of its own.
        claims.due_in_ms = None
    return claims


def _claim_keyed(
    runner: Runner, steps: Steps, owner: str, limit: int, lease_ms: int, start: int | None
) -> Claims:
    """Claim up to ``limit`` of a queue with a KEY: keyed_claim.lua picks them (its limits and
    turns), then each is claimed with a compare-and-set, held after the first ``start``;
    those that could not be are given back (``unpick``). A claimer that stops in between
    leaves its picks to keyed_claim.lua's checks: a slot of a record not claimed is dropped when
    counted, and a record left out of the pool comes back when the pool next runs dry."""
    next_at, ids = limits.pick(runner, limit, start)
    starts = len(ids) if start is None else start
    claims: list[Claim] = []
    missed: list[str] = []
    for request_id in ids:
        made = steps.claim_one(runner, request_id, owner, lease_ms, len(claims) >= starts)
        if isinstance(made, Claim):
            claims.append(made)
        else:
            missed.append(request_id)
    limits.unpick(runner, missed)
    if next_at < 0:
        return Claims.of(claims, None)
    return Claims.of(claims, max(0, next_at - runner.server_time_ms()))
