"""A worker: claims in batches, renews some leases, settles at random, logs what it got.

Log lines (tab-separated):

* ``G id fence owner``: a claim granted (written before the work starts);
* ``I id fence state owner``: a settlement about to be asked for (its intent);
* ``S id fence state owner updated_at replay``: a settlement the ledger accepted
  (``SETTLED``), with the ``updated_at`` of the record it answered, and ``1`` when that
  answer is older than the call: an earlier try, whose reply was lost, had landed;
* ``L id fence reason``: a settlement or renewal answered ``LOST``;
* ``E unavailable``: one ``LedgerUnavailable``.

Worker 0 runs with its clock ``clock_skew_hours`` off: the ledger must not care.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django_ledger import Claim, Settlement, SettlementStatus, State
from tests.support.harness.agent import Agent

__all__ = ["run"]

_LETTER = {State.COMPLETED: "COMPLETED", State.FAILED: "FAILED", State.PENDING: "PENDING"}


def skew_clock(hours: float) -> None:
    """Make this process's ``time.time`` run ``hours`` off the real clock."""
    real = time.time
    offset = hours * 3600

    def skewed() -> float:
        return real() + offset

    time.time = skewed


def run(agent: Agent) -> None:
    config = agent.config
    if agent.index == 0 and config.clock_skew_hours:
        skew_clock(config.clock_skew_hours)
    owner = f"worker-{agent.index}.{agent.incarnation}"
    lease = timedelta(seconds=config.lease_seconds)
    rng = agent.random
    while not agent.stopping:
        claims = agent.patiently(lambda: agent.ledger.claim_many(owner, config.claim_batch, lease))
        if not claims:
            time.sleep(0.02 + 0.05 * rng.random())
            continue
        agent.log([f"G\t{c.request_id}\t{c.fence}\t{owner}" for c in claims])
        time.sleep(config.work_seconds * rng.random())
        renewing = [c for c in claims if rng.random() < config.renew_rate]
        held = _renew(agent, renewing, lease)
        items = []
        for claim in claims:
            if claim.request_id in held and not held[claim.request_id]:
                continue  # the renewal said LOST: nothing left to settle
            roll = rng.random()
            if roll < config.completed_rate:
                items.append((claim, State.COMPLETED, 0.0))
            elif roll < config.completed_rate + config.failed_rate:
                items.append((claim, State.FAILED, 0.0))
            else:
                items.append((claim, State.PENDING, config.retry_delay_max * rng.random()))
        _settle(agent, owner, items)


def _renew(agent: Agent, claims: list[Claim], lease: timedelta) -> dict[str, bool]:
    held: dict[str, bool] = {}
    lines: list[str] = []
    for claim in claims:
        answer = agent.patiently(
            lambda claim=claim: agent.ledger.renew(claim, lease), give_up_after=5.0
        )
        if answer is None:
            continue  # unknown: try to settle anyway
        held[claim.request_id] = answer.ok
        if not answer.ok:
            lines.append(f"L\t{claim.request_id}\t{claim.fence}\trenew:{answer.reason}")
    agent.log(lines)
    return held


def _settle(agent: Agent, owner: str, items: list[tuple[Claim, State, float]]) -> None:
    if not items:
        return
    agent.log([f"I\t{c.request_id}\t{c.fence}\t{_LETTER[s]}\t{owner}" for c, s, _ in items])
    # A settlement interrupted by a fault is sent again as is: a replay of one that
    # did land answers SETTLED again for the same claim and fence. Before sending
    # again, read the server clock: an answer older than it is such a replay.
    since: list[int] = []
    tries = 0

    def settle() -> list[Settlement]:
        nonlocal tries
        tries += 1
        if tries > 1:
            since.append(agent.ledger.server_time_ms())
        return agent.ledger.settle_many(items)

    answers = agent.patiently(settle, give_up_after=30.0)
    if answers is None:
        return
    lines = []
    for (claim, state, _), answer in zip(items, answers, strict=True):
        if answer.status is SettlementStatus.SETTLED:
            updated = answer.record.updated_at if answer.record is not None else -1
            replay = int(bool(since) and updated < since[-1])
            lines.append(
                f"S\t{claim.request_id}\t{claim.fence}\t{_LETTER[state]}\t{owner}\t{updated}\t{replay}"
            )
        else:
            lines.append(f"L\t{claim.request_id}\t{claim.fence}\t{answer.reason}")
    agent.log(lines)
