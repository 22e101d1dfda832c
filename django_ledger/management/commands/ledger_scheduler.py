"""``manage.py ledger_scheduler``: admit each fire of ``LEDGER['SCHEDULES']`` exactly once.

Run any number, on any nodes: each fire is admitted once whatever runs, dies or restarts
(``docs/scheduler.md``). ``--once`` runs one tick and exits; ``--explain KEY`` prints the
next fires of a schedule in UTC and in its time zone. SIGTERM or SIGINT stops the loop
after the tick in progress; a second one stops it at once.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy

from ...core.errors import LedgerError
from ...core.schedule import TickReport, datetime_of
from ...services import scheduler
from ...services.probes import scheduler_probes
from ..base import LedgerCommand, add_http_arguments, float_argument, signals_handled


class Command(LedgerCommand):
    help = gettext_lazy("Admit the fires of LEDGER['SCHEDULES'], once each, until stopped.")  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help=gettext("run one tick, then exit"))
        parser.add_argument(
            "--explain",
            metavar="KEY",
            default=None,
            help=gettext("print the next fires of KEY and exit"),
        )
        parser.add_argument(
            "--count", type=int, default=10, help=gettext("fires --explain prints (default 10)")
        )
        float_argument(
            parser, "--interval", 1.0, gettext("the most seconds between two ticks (default 1)")
        )
        add_http_arguments(
            parser,
            gettext(
                "serve /healthz, /readyz and (with prometheus-client) the process's /metrics "
                "on this port"
            ),
            gettext("3 intervals, at least 10"),
        )
        parser.add_argument(
            "--node-id",
            default=None,
            help=gettext("this node's id (default: DISPATCH NODE_ID, or host:pid)"),
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
                    gettext(
                        "one tick at %(time)s: %(admitted)s admitted, %(duplicates)s already "
                        "admitted, %(recovered)s recovered for other nodes, %(count)s errors"
                    )
                    % {
                        "time": datetime_of(report.now_ms // 1000).isoformat(),
                        "admitted": report.admitted,
                        "duplicates": report.duplicates,
                        "recovered": report.recovered,
                        "count": len(report.errors),
                    }
                )
                return
            self._loop(runner, options)
        except (ImproperlyConfigured, LookupError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        except LedgerError as exc:
            raise CommandError(
                gettext("the ledger is unavailable: %(exc)s") % {"exc": exc}
            ) from exc

    def _loop(self, runner: scheduler.Scheduler, options: dict[str, Any]) -> None:
        interval = options["interval"]
        if not interval > 0:
            raise CommandError(gettext("--interval must be more than 0"))
        stop = threading.Event()
        names = ", ".join(scheduler.schedules()) or "none"
        probes = scheduler_probes(
            runner,
            stop,
            interval,
            port=options["metrics_port"],
            address=options["metrics_address"],
            max_age=options["healthz_max_age"],
            max_outage=options["readyz_max_outage"],
        )
        with _stop_on_signals(stop):
            # Said once the signals are ours: a stop asked from here on is a clean one.
            self.stdout.write(
                gettext("scheduler %(node_id)s: schedules %(names)s")
                % {"node_id": runner.node_id, "names": names}
            )
            self.stdout.flush()
            ticks = runner.run(
                stop,
                interval=interval,
                on_report=self._report,
                on_error=lambda exc: self.stderr.write(
                    gettext("tick failed: %(exc)s") % {"exc": exc}
                ),
            )
        if probes is not None:
            probes.close()
        self.stdout.write(
            gettext("scheduler %(node_id)s: stopped after %(ticks)s ticks")
            % {"node_id": runner.node_id, "ticks": ticks}
        )

    def _report(self, report: TickReport) -> None:
        if self.verbosity == 0:
            return
        for line in scheduler.report_lines(report):
            self.stdout.write(
                gettext("%(line)s node=%(node_id)s") % {"line": line, "node_id": report.node_id}
            )
        self.stdout.flush()

    def _explain(self, key: str, count: int) -> None:
        if count < 1:
            raise CommandError(gettext("--count must be at least 1"))
        found = scheduler.explain(key, count)
        config = found.config
        if config.cron is not None:
            when = gettext("cron %(cron)r") % {"cron": config.cron}
        else:
            when = gettext("every %(every)s s") % {"every": config.every}
        self.stdout.write(
            gettext("%(key)s: %(task)s on queue %(queue)r, %(when)s")
            % {"key": key, "task": config.task, "queue": config.queue, "when": when}
        )
        self.stdout.write(f"  {found.words}")
        self.stdout.write(
            "  "
            + (
                gettext("misfire %(misfire)s, grace %(grace)s, enabled")
                if config.enabled
                else gettext("misfire %(misfire)s, grace %(grace)s, disabled")
            )
            % {"misfire": config.misfire, "grace": config.grace}
        )
        if found.server_clock:
            heading = gettext("next %(count)s fires, from the Redis server's clock:")
        else:
            heading = gettext("next %(count)s fires, from this machine's clock:")
        self.stdout.write(heading % {"count": len(found.fires)})
        self.stdout.write(f"  {'UTC':<25}  {config.timezone}")
        for utc, local in found.rows():
            self.stdout.write(
                f"  {utc.strftime('%Y-%m-%d %H:%M:%S %Z'):<25}  "
                f"{local.strftime('%Y-%m-%d %H:%M:%S %Z (%z)')}"
            )


def _stop_on_signals(stop: threading.Event) -> AbstractContextManager[None]:
    """Set ``stop`` on SIGTERM or SIGINT (the tick in progress finishes first).

    A second signal exits at once: whatever that tick had decided stays pending in
    Redis, and the next tick of any scheduler finishes it.
    """

    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise SystemExit(128 + signum)
        stop.set()

    return signals_handled(handle)
