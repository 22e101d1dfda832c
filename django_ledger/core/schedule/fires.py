"""When a schedule fires: cron expressions in a time zone, and fixed intervals.

Fires are whole seconds since the epoch (UTC), the resolution of a cron expression and
of the dispatch registry's keys. ``Cron`` reads its expression with ``cronsim`` over
naive local wall times and maps each wall time to one instant with ``zoneinfo``:

- a wall time that a DST change skips (02:30 on the spring day in Europe/Paris) fires
  at the first instant after it, the moment the clocks jump (03:00 CEST); several
  skipped wall times that land on that instant fire there once;
- a wall time that a DST change repeats (02:30 on the autumn day) fires once, at its
  first occurrence (02:30 CEST); its second occurrence does not fire.

``Every`` fires at the multiples of its period since the epoch, so every node computes
the same fires with no shared starting point; it knows nothing of time zones. ``At``
fires once, at one instant (a one-off schedule).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

__all__ = [
    "MACROS",
    "MAX_INTERVAL_S",
    "At",
    "BadTiming",
    "Cron",
    "Every",
    "Timing",
    "datetime_of",
    "epoch_of",
    "zone_of",
]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND: Final = timedelta(seconds=1)
#: The ``@`` shorthands cron accepts besides five or six fields (``@reboot`` has no fires).
MACROS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_UNITS: Final = (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1))
# The furthest a cron expression is searched for its next fire (cronsim's own bound).
_HORIZON_YEARS: Final = 50
#: The longest interval: 100 years of 365 days, the bound of every other duration. A
#: longer one would put its next fire past what a datetime holds (year 9999).
MAX_INTERVAL_S: Final = 36_500 * 86_400


class BadTiming(ValueError):
    """A cron expression, interval or time zone that cannot make a schedule."""


class Timing(Protocol):
    """When a schedule fires; every instant is whole epoch seconds."""

    @property
    def zone(self) -> ZoneInfo:
        """The time zone fires are shown in (and, for cron, computed in)."""
        ...

    def next_after(self, epoch: int) -> int | None:
        """Return the first fire strictly after ``epoch``, or ``None`` if none comes."""
        ...

    def previous(self, epoch: int) -> int | None:
        """Return the last fire at or before ``epoch``, or ``None`` if none came."""
        ...

    def describe(self) -> str:
        """Say in words when it fires."""
        ...


def zone_of(name: str) -> ZoneInfo:
    """Return the ``zoneinfo`` zone ``name``; raise ``BadTiming`` for an unknown one."""
    if not isinstance(name, str) or not name.strip():
        raise BadTiming(f"a time zone must be an IANA name such as 'Europe/Paris', not {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise BadTiming(f"unknown time zone {name!r}") from exc


def epoch_of(moment: datetime) -> int:
    """Return whole epoch seconds (floored) of an aware datetime."""
    if moment.utcoffset() is None:
        raise ValueError(f"{moment!r} is naive; give an aware datetime")
    return (moment - _EPOCH) // _SECOND


def datetime_of(epoch: int) -> datetime:
    """Return epoch seconds as an aware UTC datetime."""
    return _EPOCH + timedelta(seconds=epoch)


@dataclass(frozen=True)
class Every:
    """Fire every ``seconds`` seconds, at the multiples of the period since the epoch."""

    seconds: int
    zone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, int):
            raise BadTiming(f"an interval is whole seconds, not {self.seconds!r}")
        if self.seconds < 1:
            raise BadTiming(f"an interval must be at least 1 second, not {self.seconds}")
        if self.seconds > MAX_INTERVAL_S:
            raise BadTiming(
                f"an interval must be at most 100 years ({MAX_INTERVAL_S:,} seconds), "
                f"not {self.seconds:,} seconds"
            )

    @classmethod
    def of(cls, period: timedelta | float, zone: ZoneInfo | None = None) -> Every:
        """Build from a ``timedelta`` or a number of seconds, which must be whole."""
        if isinstance(period, bool) or not isinstance(period, timedelta | int | float):
            raise BadTiming(f"an interval is a timedelta or a number of seconds, not {period!r}")
        seconds = period.total_seconds() if isinstance(period, timedelta) else float(period)
        if math.isfinite(seconds) and seconds > MAX_INTERVAL_S:
            raise BadTiming(
                f"an interval must be at most 100 years ({MAX_INTERVAL_S:,} seconds), "
                f"not {period!r}"
            )
        if not math.isfinite(seconds) or seconds != int(seconds):
            raise BadTiming(f"an interval must be whole seconds, not {period!r}")
        return cls(int(seconds), zone or ZoneInfo("UTC"))

    def next_after(self, epoch: int) -> int | None:
        return (epoch // self.seconds + 1) * self.seconds

    def previous(self, epoch: int) -> int | None:
        return epoch // self.seconds * self.seconds

    def describe(self) -> str:
        parts, rest = [], self.seconds
        for name, size in _UNITS:
            count, rest = divmod(rest, size)
            if count:
                parts.append(f"{count} {name}{'' if count == 1 else 's'}")
        if parts == ["1 second"]:
            return "Every second"
        return "Every " + " ".join(parts)


@dataclass(frozen=True)
class At:
    """Fire once, at ``epoch`` (whole seconds); shown in ``zone``."""

    epoch: int
    zone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))

    @classmethod
    def of(cls, moment: datetime | str, zone: ZoneInfo | None = None) -> At:
        """Build from a datetime or an ISO 8601 text; a naive one is read in ``zone``."""
        zone = zone or ZoneInfo("UTC")
        if isinstance(moment, str):
            try:
                moment = datetime.fromisoformat(moment)
            except ValueError as exc:
                raise BadTiming(f"{moment!r} is not an ISO 8601 date and time") from exc
        if not isinstance(moment, datetime):
            raise BadTiming(f"a one-off time is a datetime, not {moment!r}")
        if moment.utcoffset() is None:
            moment = moment.replace(tzinfo=zone)
        return cls(epoch_of(moment), zone)

    def next_after(self, epoch: int) -> int | None:
        return self.epoch if epoch < self.epoch else None

    def previous(self, epoch: int) -> int | None:
        return self.epoch if self.epoch <= epoch else None

    def describe(self) -> str:
        return f"Once, at {datetime_of(self.epoch).astimezone(self.zone).isoformat()}"


@dataclass(frozen=True)
class Cron:
    """Fire at the wall times of a cron expression in ``zone`` (DST rules above).

    Five fields (minute hour day-of-month month day-of-week), six with seconds first,
    or one of ``MACROS``; the syntax is Debian cron's, with cronsim's extensions
    (``L``, ``LW``, ``MON#2``).
    """

    expression: str
    zone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    fields: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str):
            raise BadTiming(f"a cron expression is a str, not {type(self.expression).__name__}")
        text = " ".join(self.expression.split())
        fields = MACROS.get(text.lower(), text)
        if fields.startswith("@"):
            raise BadTiming(f"unknown cron shorthand {text!r}; known: {', '.join(MACROS)}")
        if not re.fullmatch(r"[0-9A-Za-z*/,#\- ]+", fields):
            raise BadTiming(f"cron expression {text!r} holds characters cron does not read")
        try:
            probe = CronSim(fields, datetime(2000, 1, 1))
            next(probe)
        except CronSimError as exc:
            raise BadTiming(f"cron expression {text!r}: {exc}") from exc
        except StopIteration:
            raise BadTiming(f"cron expression {text!r} never fires") from None
        object.__setattr__(self, "fields", fields)

    def next_after(self, epoch: int) -> int | None:
        wall = self._wall(epoch)
        for candidate in self._walls(wall, reverse=False):
            instant = self._instant(candidate)
            # Wall times in a repeated hour map to its first occurrence, which may lie
            # before ``epoch`` when ``epoch`` is in the second one: skip those.
            if instant > epoch:
                return instant
        return None

    def previous(self, epoch: int) -> int | None:
        moment = datetime_of(epoch).astimezone(self.zone)
        start = moment.replace(tzinfo=None)
        if moment.fold:
            # ``epoch`` is in the second occurrence of a repeated hour: wall times up to
            # the end of that hour fired at their first occurrence, before ``epoch``.
            first = moment.replace(fold=0).utcoffset()
            second = moment.utcoffset()
            if first is not None and second is not None and first > second:
                start += first - second
        for candidate in self._walls(start + _SECOND, reverse=True):
            instant = self._instant(candidate)
            if instant <= epoch:
                return instant
        return None

    def describe(self) -> str:
        try:
            words = CronSim(self.fields, datetime(2000, 1, 1)).explain()
        except Exception:  # explain() covers less syntax than the parser: say the fields
            words = f"cron {self.fields}"
        zone = str(self.zone)
        return words if zone == "UTC" else f"{words} ({zone})"

    # -- wall times and instants ------------------------------------------------------

    def _walls(self, start: datetime, *, reverse: bool) -> Iterator[datetime]:
        """Yield the expression's naive wall times after (or before) ``start``."""
        limit = start.year + (-_HORIZON_YEARS if reverse else _HORIZON_YEARS)
        iterator = CronSim(self.fields, start, reverse=reverse)
        while True:
            try:
                wall = next(iterator)
            except (StopIteration, OverflowError, ValueError):
                return
            if (wall.year < limit) if reverse else (wall.year > limit):
                return
            yield wall

    def _wall(self, epoch: int) -> datetime:
        return datetime_of(epoch).astimezone(self.zone).replace(tzinfo=None, fold=0)

    def _instant(self, wall: datetime) -> int:
        """Return the instant a naive wall time fires at (the DST rules above)."""
        first = wall.replace(tzinfo=self.zone, fold=0)
        instant = epoch_of(first)
        if self._wall(instant) == wall:
            return instant  # a real wall time; for a repeated one, its first occurrence
        # Skipped: ``fold=1`` reads it with the offset after the change (an instant
        # before the jump), ``fold=0`` with the offset before (one after it). The
        # jump itself is the first instant whose wall time is past ``wall``.
        low = epoch_of(wall.replace(tzinfo=self.zone, fold=1))
        high = instant
        if low > high:
            low, high = high, low
        while high - low > 1:
            middle = (low + high) // 2
            if self._wall(middle) > wall:
                high = middle
            else:
                low = middle
        return high
