"""``MISFIRE "all"`` at the edge of its grace: a fire due exactly ``GRACE`` before now.

The grace is inclusive: a fire that waited exactly ``GRACE`` is admitted, one a second
older is not. A mutation audit found no test at that edge (``horizon - 1`` changed to
``horizon`` in ``core/schedule/misfire.py`` passed every test).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from django_ledger.core.schedule import Cron, Every, Misfire, decide, epoch_of, zone_of

GRACE_MS = 300_000  # five minutes: longer than a fire stays on time (a minute)


def utc(*parts: int) -> int:
    return epoch_of(datetime(*parts, tzinfo=UTC))  # type: ignore[misc]


@pytest.mark.parametrize("period", [60, 30, 5])
def test_a_fire_due_exactly_grace_ago_is_admitted(period: int) -> None:
    timing = Every(period)
    now = utc(2025, 6, 1, 12, 0)  # a fire of every period above
    edge = now - GRACE_MS // 1000  # due exactly GRACE before now
    assert timing.previous(edge) == edge  # a fire is due at that second
    through = edge - 10 * period  # the scheduler was away since well before

    decision = decide(timing, through, now * 1000, Misfire.ALL, GRACE_MS)

    assert decision.fires[0] == edge
    assert decision.fires == tuple(range(edge, now + 1, period))
    assert decision.dropped is not None and decision.dropped[1] == edge - period
    assert decision.through == now


def test_a_fire_a_second_past_grace_is_dropped() -> None:
    timing = Every(60)
    now = utc(2025, 6, 1, 12, 0)
    edge = now - GRACE_MS // 1000

    # One millisecond later, the fire at the edge waited longer than GRACE.
    decision = decide(timing, edge - 600, now * 1000 + 1, Misfire.ALL, GRACE_MS)

    assert decision.fires[0] == edge + 60
    assert decision.dropped is not None and decision.dropped[1] == edge


def test_a_cron_fire_due_exactly_grace_ago_is_admitted() -> None:
    nightly = Cron("0 3 * * *", zone_of("UTC"))
    fire = utc(2025, 6, 2, 3, 0)
    now_ms = fire * 1000 + GRACE_MS

    decision = decide(nightly, fire - 86_400 * 3, now_ms, Misfire.ALL, GRACE_MS)

    assert decision.fires == (fire,)
    assert decision.dropped == (fire - 86_400 * 3 + 86_400, fire - 86_400)
