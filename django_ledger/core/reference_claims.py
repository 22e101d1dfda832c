"""The reference path's claims: reads of the ready index, then one compare-and-set per record.

As ``scripts/claim.lua``/``lib/claiming.lua`` claim (priority bands, earliest due first, held claims after
the first ``start``, the wake key and the next due time), in several calls: the record is
read, decided on in Python and written with ``reference.write``, checked against the
server clock and the gate in that one step.
"""

from __future__ import annotations

from dataclasses import replace

from .errors import CorruptRecord, FusedPathOnly
from .records import PRIORITY_STEP, State, decode_record, encode_record
from .reference import write
from .results import Claim, Claims
from .runner import Runner

__all__ = ["claim"]


def _next_band(runner: Runner, start: int | str) -> tuple[int, int, int] | None:
    """The next priority band of ``ready`` from score ``start``: (low, earliest due, next)."""
    with runner.translate_errors():
        head = runner.redis.zrangebyscore(
            runner.keys.ready, start, "+inf", start=0, num=1, withscores=True
        )
    if not head:
        return None
    score = int(head[0][1])
    low = score // PRIORITY_STEP * PRIORITY_STEP
    return low, score - low, low + PRIORITY_STEP


#: While the gate is closed, an idle worker looks again after this long (claiming.lua's rule).
_GATED_MS = 1000


def _next_due(runner: Runner, now: int) -> tuple[bool, int | None]:
    """Whether a PENDING record is due at ``now``, and the earliest due after it (claiming.lua)."""
    due_now, best = False, None
    band = _next_band(runner, "-inf")
    while band is not None:
        low, earliest, after = band
        due: int | None = earliest
        if earliest <= now:
            due_now = True
            with runner.translate_errors():
                head = runner.redis.zrangebyscore(
                    runner.keys.ready, f"({low + now}", f"({after}", start=0, num=1, withscores=True
                )
            due = int(head[0][1]) - low if head else None
        if due is not None and (best is None or due < best):
            best = due
        band = _next_band(runner, after)
    return due_now, best


def _woken(runner: Runner, claims: list[Claim], limit: int, budget: int) -> Claims:
    """The wake key after a claim, as claim_due (claiming.lua) leaves it; the next due time.

    These are several calls, not one script, so the marker is cleared before the claim
    reads the index (``claim``), never after: an admission that comes in between is
    either seen by the claim or leaves its marker after the clear, and no wake-up is lost.
    """
    now = runner.server_time_ms()
    due_now, best = _next_due(runner, now)
    if budget <= 0 and len(claims) < limit:
        return Claims(claims)  # corrupt records at the head: repair's to clear
    if len(claims) >= limit and due_now:
        runner.write("ZADD", runner.keys.wake, now, "w")  # more is due: another worker wakes
        return Claims.of(claims, 0)
    return Claims.of(claims, None if best is None else max(0, best - now))


def _clear_wake(runner: Runner) -> None:
    """Delete the wake marker, if there is one, before a claim reads the ready index."""
    with runner.translate_errors():
        stale = runner.redis.exists(runner.keys.wake)
    if stale:
        runner.write("DEL", runner.keys.wake)


def claim(
    runner: Runner, owner: str, limit: int, lease_ms: int, start: int | None = None
) -> Claims:
    """Claim up to ``limit``; those after the first ``start`` are held (claiming.lua's rule).

    Refused on a queue with flow limits stored (by a fused ledger): the fused claim
    scripts alone apply them. Every claim of the call is taken at its one instant, as
    ``claim.lua`` takes a batch in one script: claimed together, their leases run out
    together, so both modes agree on the order in which repair ends them (ties: the
    lowest id).
    """
    with runner.translate_errors():
        limited = runner.redis.exists(runner.keys.limits)
    if limited:
        raise FusedPathOnly("claims of a queue with flow limits")
    start = limit if start is None else start
    claims: list[Claim] = []
    with runner.translate_errors():
        if runner.redis.exists(runner.keys.gate):
            # Closed: not even a fence is taken (write.lua checks again).
            return Claims.of(claims, _GATED_MS)
    _clear_wake(runner)
    skipped = 0
    budget = limit * 4 + 64
    # Priority bands, highest first (codec.lua's next_band); the earliest due first in each.
    band = _next_band(runner, "-inf")
    now = runner.server_time_ms()
    while band is not None and len(claims) < limit and budget > 0:
        low, earliest, after = band
        ids: list[bytes] = []
        if earliest <= now:
            with runner.translate_errors():
                ids = runner.redis.zrangebyscore(
                    runner.keys.ready, low, low + now, start=skipped, num=limit - len(claims)
                )
        if not ids:
            band, skipped = _next_band(runner, after), 0
            continue
        for raw_id in ids:
            budget -= 1
            request_id = raw_id.decode("utf-8")
            made = _claim_one(runner, request_id, owner, lease_ms, len(claims) >= start, now)
            if made == "stale":
                # Step over an entry that stays in the index (corrupt, or disagreeing with
                # its record: repair sorts it out), but not one a rival just claimed: that
                # one has left the index, and counting it would skip a due record.
                with runner.translate_errors():
                    still_indexed = runner.redis.zscore(runner.keys.ready, request_id) is not None
                skipped += 1 if still_indexed else 0
            elif made == "gated":
                return Claims.of(claims, _GATED_MS)  # the gate closed
            elif isinstance(made, Claim):
                claims.append(made)
    return _woken(runner, claims, limit, budget)


def _claim_one(
    runner: Runner, request_id: str, owner: str, lease_ms: int, hold: bool, now: int
) -> Claim | str:
    """Claim one due PENDING record at the call's instant ``now`` (held when ``hold``,
    unless its held claim was given back); else say why not: ``"stale"`` (not a due
    PENDING record), ``"gated"`` (the gate closed), ``"refused"`` (it changed under the
    write)."""
    _, raw = runner.now_and_raw(request_id)  # the clock read is the call's, not this claim's
    try:
        record = None if raw is None else decode_record(request_id, raw)
    except CorruptRecord:
        record = None
    if raw is None or record is None or record.state is not State.PENDING or record.due_at > now:
        return "stale"
    # A fence taken and then not used (the write below refused) is only a gap.
    fence = int(runner.run(runner.scripts.fence, [record.fence]))
    new = replace(
        record,
        state=State.CLAIMED,
        owner=owner,
        attempts=record.attempts + 1,
        fence=fence,
        lease_until=now + lease_ms,
        updated_at=now,
        held=hold and not record.given_back,
        given_back=False,
    )
    code = write(
        runner, request_id, raw, encode_record(new), new, not_before=record.due_at, gate="open"
    )
    if code == -2:
        return "gated"
    if code != 1:
        return "refused"
    return Claim(
        request_id,
        new.payload,
        owner,
        new.attempts,
        new.fence,
        now + lease_ms,
        new.traceparent,
        new.held,
    )
