"""When schedules fire: cron in a time zone across DST changes, and fixed intervals.

Every instant here is pinned; nothing waits for a clock. The DST days are those of 2025:
Europe/Paris springs forward on 30 March (02:00 CET -> 03:00 CEST, 01:00 UTC) and falls
back on 26 October (03:00 CEST -> 02:00 CET, 01:00 UTC); America/New_York springs forward
on 9 March (02:00 EST -> 03:00 EDT, 07:00 UTC) and falls back on 2 November (02:00 EDT ->
01:00 EST, 06:00 UTC).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_ledger.core.schedule import (
    BadTiming,
    Cron,
    Every,
    Timing,
    datetime_of,
    epoch_of,
    zone_of,
)

PARIS = zone_of("Europe/Paris")
NEW_YORK = zone_of("America/New_York")


def utc(*parts: int) -> int:
    return epoch_of(datetime(*parts, tzinfo=UTC))  # type: ignore[misc]


def fires(timing: Timing, after: int, count: int) -> list[int]:
    found, at = [], after
    for _ in range(count):
        nxt = timing.next_after(at)
        assert nxt is not None
        found.append(nxt)
        at = nxt
    return found


def fires_between(timing: Timing, start: int, end: int) -> list[int]:
    found, at = [], start
    while True:
        nxt = timing.next_after(at)
        if nxt is None or nxt > end:
            return found
        found.append(nxt)
        at = nxt


def local(epoch: int, zone: object) -> str:
    return datetime_of(epoch).astimezone(zone).strftime("%m-%d %H:%M %Z")  # type: ignore[arg-type]


# -- DST: a skipped local time fires at the first instant after it ----------------------


def test_paris_spring_a_skipped_time_fires_when_the_clocks_jump() -> None:
    nightly = Cron("30 2 * * *", PARIS)

    found = fires(nightly, utc(2025, 3, 28), 4)

    assert [local(f, PARIS) for f in found] == [
        "03-28 02:30 CET",
        "03-29 02:30 CET",
        "03-30 03:00 CEST",  # 02:30 does not exist that night
        "03-31 02:30 CEST",
    ]
    assert found[2] == utc(2025, 3, 30, 1, 0)


def test_new_york_spring_a_skipped_time_fires_when_the_clocks_jump() -> None:
    nightly = Cron("30 2 * * *", NEW_YORK)

    found = fires(nightly, utc(2025, 3, 8), 3)

    assert [local(f, NEW_YORK) for f in found] == [
        "03-08 02:30 EST",
        "03-09 03:00 EDT",
        "03-10 02:30 EDT",
    ]
    assert found[1] == utc(2025, 3, 9, 7, 0)


def test_skipped_times_that_land_on_one_instant_fire_there_once() -> None:
    # 02:00, 02:20 and 02:40 are skipped; they and 03:00 itself are one instant.
    every_20 = Cron("*/20 * * * *", PARIS)

    found = fires_between(every_20, utc(2025, 3, 30, 0, 30), utc(2025, 3, 30, 1, 30))

    assert [local(f, PARIS) for f in found] == [
        "03-30 01:40 CET",
        "03-30 03:00 CEST",
        "03-30 03:20 CEST",
    ]


# -- DST: a repeated local time fires once ---------------------------------------------


def test_paris_autumn_a_repeated_time_fires_once_at_its_first_occurrence() -> None:
    nightly = Cron("30 2 * * *", PARIS)

    found = fires(nightly, utc(2025, 10, 25), 3)

    assert [local(f, PARIS) for f in found] == [
        "10-25 02:30 CEST",
        "10-26 02:30 CEST",  # and not again at 02:30 CET, an hour later
        "10-27 02:30 CET",
    ]
    assert found[1] == utc(2025, 10, 26, 0, 30)


def test_new_york_autumn_a_repeated_time_fires_once() -> None:
    nightly = Cron("30 1 * * *", NEW_YORK)

    found = fires(nightly, utc(2025, 11, 1), 3)

    assert [local(f, NEW_YORK) for f in found] == [
        "11-01 01:30 EDT",
        "11-02 01:30 EDT",
        "11-03 01:30 EST",
    ]


def test_in_the_repeated_hour_no_wall_time_fires_twice() -> None:
    every_30 = Cron("*/30 * * * *", PARIS)

    found = fires_between(every_30, utc(2025, 10, 25, 23, 30), utc(2025, 10, 26, 3, 0))

    walls = [datetime_of(f).astimezone(PARIS).strftime("%H:%M") for f in found]
    assert walls == ["02:00", "02:30", "03:00", "03:30", "04:00"]
    assert len(set(walls)) == len(walls)


def test_previous_inside_the_repeated_hour_is_its_first_occurrence() -> None:
    every_30 = Cron("*/30 * * * *", PARIS)

    # 01:30 UTC is 02:30 CET, the second occurrence: that wall time fired at 00:30 UTC.
    assert every_30.previous(utc(2025, 10, 26, 1, 30)) == utc(2025, 10, 26, 0, 30)
    assert every_30.previous(utc(2025, 10, 26, 2, 0)) == utc(2025, 10, 26, 2, 0)


def test_a_day_in_a_zone_without_dst_has_its_24_hourly_fires() -> None:
    hourly = Cron("0 * * * *", zone_of("Asia/Tokyo"))

    found = fires_between(hourly, utc(2025, 3, 29, 15), utc(2025, 3, 30, 15))

    assert len(found) == 24


@pytest.mark.parametrize(
    ("day", "count"),
    [(30, 23), (26, 24)],
    ids=["spring: 23 hours, 23 fires", "autumn: 25 hours, 24 fires"],
)
def test_an_hourly_cron_fires_once_per_local_hour_on_a_dst_day(day: int, count: int) -> None:
    hourly = Cron("0 * * * *", PARIS)
    month = 3 if day == 30 else 10
    midnight = epoch_of(datetime(2025, month, day, tzinfo=PARIS))
    next_midnight = epoch_of(datetime(2025, month, day + 1, tzinfo=PARIS))

    found = fires_between(hourly, midnight - 1, next_midnight - 1)

    assert len(found) == count
    assert len({datetime_of(f).astimezone(PARIS).hour for f in found}) == count


# -- properties -------------------------------------------------------------------------

ZONES = ["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
EXPRESSIONS = ["30 2 * * *", "*/15 * * * *", "0 * * * *", "0 0 * * 0", "*/20 * * * * *"]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(EXPRESSIONS),
    st.sampled_from(ZONES),
    st.integers(utc(2024, 1, 1), utc(2027, 1, 1)),
)
def test_previous_and_next_agree(expression: str, zone: str, at: int) -> None:
    timing = Cron(expression, zone_of(zone))

    nxt = timing.next_after(at)
    prev = timing.previous(at)

    assert nxt is not None and prev is not None
    assert prev <= at < nxt
    assert timing.previous(nxt) == nxt
    assert timing.next_after(prev) == nxt  # nothing fires between them
    assert timing.previous(nxt - 1) == prev


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 100_000), st.integers(0, 2**40))
def test_every_fires_at_the_multiples_of_its_period(period: int, at: int) -> None:
    every = Every(period)

    nxt, prev = every.next_after(at), every.previous(at)

    assert nxt is not None and prev is not None
    assert nxt % period == 0 and prev % period == 0
    assert prev <= at < nxt == prev + period


def test_every_ignores_dst() -> None:
    every = Every.of(timedelta(hours=1), PARIS)

    found = fires_between(every, utc(2025, 10, 25, 22), utc(2025, 10, 26, 22))

    assert len(found) == 24  # elapsed hours, whatever the wall clock does
    assert all(b - a == 3600 for a, b in pairwise(found))


# -- reading expressions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("macro", "fields"),
    [("@daily", "0 0 * * *"), ("@hourly", "0 * * * *"), ("@weekly", "0 0 * * 0")],
)
def test_macros_are_their_fields(macro: str, fields: str) -> None:
    at = utc(2025, 6, 4, 12, 34)
    assert Cron(macro).next_after(at) == Cron(fields).next_after(at)


def test_six_fields_have_seconds_first() -> None:
    assert fires(Cron("*/15 * * * * *"), utc(2025, 1, 1), 3) == [
        utc(2025, 1, 1, 0, 0, 15),
        utc(2025, 1, 1, 0, 0, 30),
        utc(2025, 1, 1, 0, 0, 45),
    ]


@pytest.mark.parametrize(
    "expression",
    ["61 * * * *", "* * *", "0 0 31 2 *", "@reboot", "@sometimes", "0 0 * * FOO", "0 0 ? * *"],
)
def test_a_bad_expression_is_refused(expression: str) -> None:
    with pytest.raises(BadTiming):
        Cron(expression)


@pytest.mark.parametrize("period", [0, -5, 1.5, timedelta(milliseconds=1500), "60", True])
def test_a_bad_interval_is_refused(period: object) -> None:
    with pytest.raises(BadTiming):
        Every.of(period)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", 3])
def test_an_unknown_zone_is_refused(name: object) -> None:
    with pytest.raises(BadTiming):
        zone_of(name)  # type: ignore[arg-type]


def test_schedules_say_when_they_fire_in_words() -> None:
    assert Cron("0 3 * * *", PARIS).describe() == "At 03:00 every day (Europe/Paris)"
    assert Cron("@hourly").describe() == "At the start of every hour"
    assert Every.of(timedelta(minutes=5)).describe() == "Every 5 minutes"
    assert Every.of(5400).describe() == "Every 1 hour 30 minutes"
    assert Every.of(1).describe() == "Every second"
