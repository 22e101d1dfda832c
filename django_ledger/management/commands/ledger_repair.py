"""``manage.py ledger_repair``: full repair cycles over one queue, several, or all."""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy

from django_ledger.core.results import RepairReport
from django_ledger.services import QueueRepair, configured_queues, repair_queues

from ..base import LedgerCommand, float_argument, refused, signals_handled

BAR_WIDTH = 30


class Command(LedgerCommand):
    help = gettext_lazy(
        "Repair the ledger: quarantine corrupt records, give back expired leases (DEAD "
        "after MAX_ATTEMPTS), rebuild indexes and purge terminal records past "
        "RETENTION. Runs one full cycle over every configured queue unless told "
        "otherwise."
    )  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "queues",
            nargs="*",
            metavar="queue",
            help=gettext("queues to repair (default: all configured)"),
        )
        parser.add_argument(
            "--count",
            type=int,
            default=100,
            help=gettext("records per HSCAN page, 1 to 10000 (default 100)"),
        )
        parser.add_argument(
            "--loop",
            action="store_true",
            help=gettext("repeat cycles until stopped (SIGINT or SIGTERM)"),
        )
        float_argument(
            parser, "--interval", 60.0, gettext("seconds to wait between cycles (default 60)")
        )
        parser.add_argument(
            "--max-cycles",
            type=int,
            default=None,
            help=gettext("stop after this many cycles (default: 1, or unbounded with --loop)"),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        count, interval, max_cycles = options["count"], options["interval"], options["max_cycles"]
        if not 1 <= count <= 10_000:
            raise CommandError(
                gettext("--count must be from 1 to 10000, got %(count)s") % {"count": count}
            )
        if interval < 0:
            raise CommandError(
                gettext("--interval must not be negative, got %(interval)s")
                % {"interval": interval}
            )
        if max_cycles is not None and max_cycles < 1:
            raise CommandError(
                gettext("--max-cycles must be at least 1, got %(max_cycles)s")
                % {"max_cycles": max_cycles}
            )
        with refused(ImproperlyConfigured):
            queues = configured_queues(options["queues"])
        if max_cycles is None and not options["loop"]:
            max_cycles = 1
        stop = threading.Event()
        failures = 0
        cycle = 0

        def on_signal(signum: int, frame: FrameType | None) -> None:
            # SIGINT and SIGTERM set ``stop``; a second SIGINT interrupts at once.
            if stop.is_set() and signum == signal.SIGINT:
                raise KeyboardInterrupt
            stop.set()

        with signals_handled(on_signal):
            while not stop.is_set():
                cycle += 1
                results = repair_queues(
                    queues, count, should_stop=stop.is_set, on_page=self._progress()
                )
                for result in results:
                    self._report(cycle, result)
                    failures += result.error is not None
                if stop.is_set() or (max_cycles is not None and cycle >= max_cycles):
                    break
                _sleep(interval, stop)
        if stop.is_set():
            self.stdout.write(gettext("stopped on signal, after the page in hand"))
        if failures:
            raise CommandError(
                gettext("repair failed %(failures)s time(s); see the lines above")
                % {"failures": failures}
            )

    def _report(self, cycle: int, result: QueueRepair) -> None:
        if self.stdout.isatty():
            self.stdout.write("\r\x1b[K", ending="")
        counts = " ".join(f"{name}={value}" for name, value in result.report.counts().items())
        line = f"cycle {cycle} queue {result.queue}: {counts}"
        if result.error is not None:
            self.stderr.write(
                gettext("%(line)s ERROR: %(error)s") % {"line": line, "error": result.error},
                self.style.ERROR,
            )
        elif not result.complete:
            self.stdout.write(
                gettext("%(line)s (stopped after %(pages)s page(s))")
                % {"line": line, "pages": result.pages},
                self.style.WARNING,
            )
        else:
            self.stdout.write(line)

    def _progress(self) -> Any:
        """Draw a progress bar on a terminal; on anything else, only the cycle lines."""
        if not self.stdout.isatty():
            return None

        def draw(result: QueueRepair, page: RepairReport) -> None:
            total = max(result.total, 1)
            done = min(result.report.scanned, total)
            filled = BAR_WIDTH * done // total
            bar = "#" * filled + "-" * (BAR_WIDTH - filled)
            self.stdout.write(
                (
                    "\r"
                    + gettext("%(queue)s [%(bar)s] %(done)s/%(total)s records")
                    % {"queue": result.queue, "bar": bar, "done": done, "total": result.total}
                ),
                ending="",
            )
            self.stdout.flush()

        return draw


def _sleep(seconds: float, stop: threading.Event) -> None:
    deadline = time.monotonic() + seconds
    while not stop.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(remaining, 0.1))
