"""The scheduler's loop: tick, then wait on the stop event until the next fire is due.

One place owns the stop: a ``threading.Event`` the caller sets (a signal handler, a
worker shutting down). Every wait is a wait on that event with a time-out, never a bare
sleep, so a stop is honoured within one tick.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final

from ..errors import LedgerError
from ..probes import Contact, Turns, stall_for_tests
from .ticker import TickReport

__all__ = ["SchedulerLoop"]

logger = logging.getLogger("django_ledger.scheduler")

#: Waits are never shorter, so a clock boundary is crossed before the next tick.
_MIN_WAIT: Final = 0.005
#: After the next fire's second begins, wait this much more (server clock rounding).
_PAST_BOUNDARY: Final = 0.002


class SchedulerLoop:
    """Call ``tick`` until ``stop`` is set; wait at most ``interval`` seconds between ticks.

    Between ticks it waits until the soonest next fire (by the server clock the tick
    read), or ``interval`` if that is sooner, so that pauses, resumes and fires left by
    dead nodes are seen within ``interval``. While Redis is unavailable it waits
    ``backoff`` seconds and tries again; ``on_report`` sees every report and
    ``on_error`` every ``LedgerError``. ``turns`` notes each turn of the loop and
    ``contact`` whether Redis answered each tick (the probes: ``core/probes.py``).
    """

    def __init__(
        self,
        tick: Callable[[], TickReport],
        *,
        interval: float = 1.0,
        backoff: float = 1.0,
        on_report: Callable[[TickReport], None] | None = None,
        on_error: Callable[[LedgerError], None] | None = None,
        turns: Turns | None = None,
        contact: Contact | None = None,
    ) -> None:
        if not interval > 0 or not backoff > 0:
            raise ValueError("interval and backoff must be positive")
        self.tick = tick
        self.interval = interval
        self.backoff = backoff
        self.on_report = on_report
        self.on_error = on_error
        self.ticks = 0
        self.turns = turns or Turns()
        self.contact = contact or Contact()

    def run(self, stop: threading.Event) -> int:
        """Tick until ``stop`` is set; return how many ticks ran."""
        while not stop.is_set():
            self.turns.turned()
            stall_for_tests()
            try:
                report = self.tick()
                self.contact.answered()
            except LedgerError as exc:
                self.contact.after(exc)
                logger.warning("scheduler tick failed: %s", exc)
                if self.on_error is not None:
                    self.on_error(exc)
                stop.wait(self.backoff)
                continue
            self.ticks += 1
            if self.on_report is not None:
                self.on_report(report)
            stop.wait(self.wait_after(report))
        return self.ticks

    def wait_after(self, report: TickReport) -> float:
        """Return how long to wait after ``report`` before the next tick."""
        if report.more:
            return 0.0
        wait = self.interval
        if report.next_due is not None:
            until = (report.next_due * 1000 - report.now_ms) / 1000 + _PAST_BOUNDARY
            wait = min(wait, until)
        return max(_MIN_WAIT, wait)
