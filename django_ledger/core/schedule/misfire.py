"""Which due fires to admit: on-time fires always, missed ones as the misfire policy says.

A fire is **on time** while no scheduler could have been expected to reach it sooner:
until the schedule's next fire is due, and at most a minute (``ON_TIME``). A fire that
waited longer was **missed** (every scheduler was down, or Redis was). The policy
decides what missed fires become:

- ``latest`` (the default): the newest missed fire is admitted, the older ones not;
- ``all``: every missed fire within ``grace`` of now is admitted, oldest first;
- ``skip``: none is.

``decide`` is a pure function of the schedule, the state ``through`` (fires up to that
second are decided) and the Redis server time, so every node that decides from the
same state at the same server time decides the same; the state's compare-and-set
makes one decision the decision.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Final

from .fires import Timing

__all__ = ["MAX_FIRES", "ON_TIME_MS", "Decision", "Misfire", "decide"]

#: The most a fire may wait and still be on time, whatever its schedule's period.
ON_TIME_MS: Final = 60_000
#: The most fires one decision admits; ``all`` catches up the rest at the next ticks.
MAX_FIRES: Final = 100


class Misfire(enum.Enum):
    LATEST = "latest"
    ALL = "all"
    SKIP = "skip"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Decision:
    """What one tick decides for one schedule.

    ``fires`` are to be admitted, oldest first. ``through`` is the new state: every fire
    up to that second is decided. ``dropped`` is the first and last missed fire that
    the policy leaves out (``None`` when it leaves none out).
    """

    fires: tuple[int, ...]
    through: int
    dropped: tuple[int, int] | None = None

    @property
    def changes(self) -> bool:
        return bool(self.fires) or self.dropped is not None


def decide(
    timing: Timing,
    through: int,
    now_ms: int,
    misfire: Misfire = Misfire.LATEST,
    grace_ms: int = 3_600_000,
    limit: int = MAX_FIRES,
) -> Decision:
    """Decide the fires due in ``(through, now]`` (seconds; ``now_ms`` is the server clock)."""
    now = now_ms // 1000
    newest = timing.previous(now)
    if newest is None or newest <= through:
        return Decision((), through)
    if misfire is Misfire.ALL:
        return _all(timing, through, now_ms, grace_ms, limit)
    on_time: list[int] = []
    fire: int | None = newest
    while fire is not None and fire > through and _on_time(timing, fire, now_ms):
        on_time.append(fire)
        fire = timing.previous(fire - 1)
    on_time.reverse()
    if fire is None or fire <= through:
        return Decision(tuple(on_time[-limit:]), now)
    newest_missed = fire
    first_missed = timing.next_after(through)
    assert first_missed is not None  # ``newest_missed`` is one
    if misfire is Misfire.LATEST:
        fires = [newest_missed, *on_time]
        dropped_last = timing.previous(newest_missed - 1)
        dropped = None
        if dropped_last is not None and dropped_last > through:
            dropped = (first_missed, dropped_last)
        return Decision(tuple(fires[-limit:]), now, dropped)
    return Decision(tuple(on_time[-limit:]), now, (first_missed, newest_missed))


def _all(timing: Timing, through: int, now_ms: int, grace_ms: int, limit: int) -> Decision:
    now = now_ms // 1000
    # No fire older than this second is within grace or on time.
    horizon = math.ceil((now_ms - max(grace_ms, ON_TIME_MS)) / 1000)
    start = max(through, horizon - 1)
    fires: list[int] = []
    fire = timing.next_after(start)
    while fire is not None and fire <= now:
        if now_ms - fire * 1000 <= grace_ms or _on_time(timing, fire, now_ms):
            fires.append(fire)
            if len(fires) == limit:
                break
        fire = timing.next_after(fire)
    dropped = None
    first = timing.next_after(through)
    if first is not None and (not fires or first < fires[0]):
        last = timing.previous((fires[0] if fires else now + 1) - 1)
        if last is not None and last >= first:
            dropped = (first, last)
    if len(fires) == limit and fire is not None and fire <= now:
        # More are due than one decision admits: the next tick goes on from here.
        return Decision(tuple(fires), fires[-1], dropped)
    return Decision(tuple(fires), now, dropped)


def _on_time(timing: Timing, fire: int, now_ms: int) -> bool:
    late_ms = now_ms - fire * 1000
    following = timing.next_after(fire)
    window = ON_TIME_MS if following is None else min(ON_TIME_MS, (following - fire) * 1000)
    return late_ms <= window
