"""``manage.py ledger_scheduler``: admit each fire of ``LEDGER['SCHEDULES']`` exactly once.

Run any number, on any nodes: each fire is admitted once whatever runs, dies or restarts
(``docs/scheduler.md``). ``--once`` runs one tick and exits; ``--explain KEY`` prints the
next fires of a schedule in UTC and in its time zone. SIGTERM or SIGINT stops the loop
after the tick in progress; a second one stops it at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...core.errors import LedgerError
from ...core.schedule import TickReport, datetime_of
from ...services import scheduler


class Command(BaseCommand):
    help = "Admit the fires of LEDGER['SCHEDULES'], once each, until stopped."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="run one tick, then exit")
        parser.add_argument(
            "--explain", metavar="KEY", default=None, help="print the next fires of KEY and exit"
        )
        parser.add_argument(
            "--count", type=int, default=10, help="fires --explain prints (default 10)"
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=1.0,
            help="the most seconds between two ticks (default 1)",
        )
        parser.add_argument(
            "--node-id",
            default=None,
            help="this node's id (default: DISPATCH NODE_ID, or host:pid)",
        )

    verbosity = 1

    def handle(self, *args: Any, **options: Any) -> None:
        self.verbosity = options["verbosity"]
        try:
            if options["explain"] is not None:
                self._explain(options["explain"], options["count"])
                return
            scheduler.schedules()  # a bad setting stops here, with its check id
            runner = scheduler.Scheduler(options["node_id"])
            if options["once"]:
                report = runner.tick()
                self._report(report)
                self.stdout.write(
                    f"one tick at {datetime_of(report.now_ms // 1000).isoformat()}: "
                    f"{report.admitted} admitted, {report.duplicates} already admitted, "
                    f"{report.recovered} recovered for other nodes, {len(report.errors)} errors"
                )
                return
            self._loop(runner, options["interval"])
        except (ImproperlyConfigured, LookupError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        except LedgerError as exc:
            raise CommandError(f"the ledger is unavailable: {exc}") from exc

    def _loop(self, runner: scheduler.Scheduler, interval: float) -> None:
        if not interval > 0:
            raise CommandError("--interval must be more than 0")
        stop = threading.Event()
        names = ", ".join(scheduler.schedules()) or "none"
        with _stop_on_signals(stop):
            # Said once the signals are ours: a stop asked from here on is a clean one.
            self.stdout.write(f"scheduler {runner.node_id}: schedules {names}")
            self.stdout.flush()
            ticks = runner.run(
                stop,
                interval=interval,
                on_report=self._report,
                on_error=lambda exc: self.stderr.write(f"tick failed: {exc}"),
            )
        self.stdout.write(f"scheduler {runner.node_id}: stopped after {ticks} ticks")

    def _report(self, report: TickReport) -> None:
        if self.verbosity == 0:
            return
        for line in scheduler.report_lines(report):
            self.stdout.write(f"{line} node={report.node_id}")
        self.stdout.flush()

    def _explain(self, key: str, count: int) -> None:
        if count < 1:
            raise CommandError("--count must be at least 1")
        found = scheduler.explain(key, count)
        config = found.config
        when = f"cron {config.cron!r}" if config.cron is not None else f"every {config.every} s"
        self.stdout.write(f"{key}: {config.task} on queue {config.queue!r}, {when}")
        self.stdout.write(f"  {found.words}")
        self.stdout.write(
            f"  misfire {config.misfire}, grace {config.grace}, "
            f"{'enabled' if config.enabled else 'disabled'}"
        )
        clock = "the Redis server's clock" if found.server_clock else "this machine's clock"
        self.stdout.write(f"next {len(found.fires)} fires, from {clock}:")
        self.stdout.write(f"  {'UTC':<25}  {config.timezone}")
        for utc, local in found.rows():
            self.stdout.write(
                f"  {utc.strftime('%Y-%m-%d %H:%M:%S %Z'):<25}  "
                f"{local.strftime('%Y-%m-%d %H:%M:%S %Z (%z)')}"
            )


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set ``stop`` on SIGTERM or SIGINT (the tick in progress finishes first).

    A second signal exits at once: whatever that tick had decided stays pending in
    Redis, and the next tick of any scheduler finishes it.
    """

    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise SystemExit(128 + signum)
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
