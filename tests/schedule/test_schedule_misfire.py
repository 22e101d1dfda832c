"""The misfire policy after a simulated downtime, decided against pinned server times.

``MISFIRE "all"`` at the edge of its grace: the grace is inclusive, so a fire that
waited exactly ``GRACE`` is admitted, and one a moment older is not.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from django_ledger.core.schedule import (
    MAX_FIRES,
    Cron,
    Every,
    Misfire,
    decide,
    epoch_of,
    zone_of,
)

MINUTE = Every(60)
NIGHTLY = Cron("0 3 * * *", zone_of("Europe/Paris"))
HOUR_MS = 3_600_000


def utc(*parts: int) -> int:
    return epoch_of(datetime(*parts, tzinfo=UTC))  # type: ignore[misc]


def test_nothing_is_due_before_the_next_fire() -> None:
    through = utc(2025, 6, 1, 12, 0)

    decision = decide(MINUTE, through, (through + 59) * 1000)

    assert decision.fires == () and decision.through == through and not decision.changes


@pytest.mark.parametrize("misfire", list(Misfire))
def test_a_fire_on_time_is_admitted_whatever_the_policy(misfire: Misfire) -> None:
    through = utc(2025, 6, 1, 12, 0)

    decision = decide(MINUTE, through, (through + 60) * 1000 + 250, misfire)

    assert decision.fires == (through + 60,)
    assert decision.through == through + 60
    assert decision.dropped is None


def test_a_fire_stays_on_time_until_the_next_is_due() -> None:
    through = utc(2025, 6, 1, 12, 0)
    fire = through + 60

    # Both fires due at once: the older one waited longer than its period, missed.
    decision = decide(MINUTE, through, (fire + 61) * 1000, Misfire.SKIP)

    assert decision.fires == (fire + 60,)
    assert decision.dropped == (fire, fire)


def test_a_fire_more_than_a_minute_late_is_missed_even_if_rare() -> None:
    fire = utc(2025, 6, 2, 1, 0)  # 03:00 in Paris
    through = fire - 1

    on_time = decide(NIGHTLY, through, (fire + 60) * 1000, Misfire.SKIP)
    missed = decide(NIGHTLY, through, (fire + 61) * 1000, Misfire.SKIP)

    assert on_time.fires == (fire,)
    assert missed.fires == () and missed.dropped == (fire, fire)


# -- after a downtime: the scheduler (every node) was down from `through` to `now` -----

DOWN_FROM = utc(2025, 6, 1, 12, 0)
NOW_MS = utc(2025, 6, 1, 14, 30) * 1000 + 400  # 150 minutes later


def test_latest_admits_the_newest_missed_fire_and_drops_the_rest() -> None:
    decision = decide(MINUTE, DOWN_FROM, NOW_MS, Misfire.LATEST)

    now = NOW_MS // 1000
    # 14:30 is on time (it just came due); 14:29 is the newest missed one.
    assert decision.fires == (now - 60, now)
    assert decision.dropped == (DOWN_FROM + 60, now - 120)
    assert decision.through == now


def test_latest_after_days_down_runs_a_nightly_job_once() -> None:
    through = utc(2025, 6, 1, 2, 0)
    now_ms = utc(2025, 6, 5, 9, 0) * 1000

    decision = decide(NIGHTLY, through, now_ms, Misfire.LATEST)

    assert decision.fires == (utc(2025, 6, 5, 1, 0),)  # this morning's 03:00 Paris
    assert decision.dropped == (utc(2025, 6, 2, 1, 0), utc(2025, 6, 4, 1, 0))


def test_skip_admits_none_of_the_missed_fires() -> None:
    decision = decide(MINUTE, DOWN_FROM, NOW_MS, Misfire.SKIP)

    now = NOW_MS // 1000
    assert decision.fires == (now,)  # the one on time
    assert decision.dropped == (DOWN_FROM + 60, now - 60)


def test_skip_with_nothing_on_time_admits_nothing_and_moves_on() -> None:
    # Every 5 minutes; now is 4 minutes past the newest fire: that one is missed too.
    now_ms = NOW_MS + 4 * 60_000

    decision = decide(Every(300), DOWN_FROM, now_ms, Misfire.SKIP)

    assert decision.fires == ()
    assert decision.dropped == (DOWN_FROM + 300, NOW_MS // 1000)
    assert decision.changes and decision.through == now_ms // 1000


def test_all_admits_every_missed_fire_within_grace_oldest_first() -> None:
    decision = decide(MINUTE, DOWN_FROM, NOW_MS, Misfire.ALL, grace_ms=HOUR_MS)

    now = NOW_MS // 1000
    assert decision.fires == tuple(range(now - 3600 + 60, now + 1, 60))
    assert len(decision.fires) == 60
    assert decision.dropped == (DOWN_FROM + 60, now - 3600)
    assert decision.through == now


def test_all_with_a_grace_longer_than_the_downtime_drops_nothing() -> None:
    decision = decide(MINUTE, DOWN_FROM, NOW_MS, Misfire.ALL, grace_ms=24 * HOUR_MS)

    assert len(decision.fires) == 150 - 50  # the first MAX_FIRES of the 150 due
    assert MAX_FIRES == 100
    assert decision.fires[0] == DOWN_FROM + 60
    assert decision.dropped is None
    # More are due than one decision admits: "through" stops at the last admitted.
    assert decision.through == decision.fires[-1]

    rest = decide(MINUTE, decision.through, NOW_MS, Misfire.ALL, grace_ms=24 * HOUR_MS)

    assert rest.fires[0] == decision.fires[-1] + 60
    assert rest.fires[-1] == NOW_MS // 1000 and len(rest.fires) == 50
    assert rest.through == NOW_MS // 1000


def test_all_never_drops_a_fire_on_time_even_with_a_tiny_grace() -> None:
    through = utc(2025, 6, 1, 12, 0)

    decision = decide(MINUTE, through, (through + 60) * 1000 + 30_000, Misfire.ALL, grace_ms=1000)

    assert decision.fires == (through + 60,)


@pytest.mark.parametrize("misfire", list(Misfire))
def test_a_decision_depends_on_the_state_and_the_server_time_alone(misfire: Misfire) -> None:
    # What "every node decides the same" rests on: no hidden input (no local clock).
    answers = {decide(NIGHTLY, utc(2025, 5, 1), NOW_MS, misfire, HOUR_MS) for _ in range(5)}

    assert len(answers) == 1


# -- MISFIRE "all" at the edge of its grace ------------------------------------------------

GRACE_MS = 300_000  # five minutes: longer than a fire stays on time (a minute)


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
