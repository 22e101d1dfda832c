"""``manage.py ledger_worker [QUEUE ...]``: run tasks, renew their leases, repair, stop cleanly.

A thin face over ``django_ledger.core.worker``: it reads the settings, builds a handler per
queue (Django tasks, or the queue's raw ``HANDLER``), owns the signals, and runs the
runtime. ``--processes N`` runs N such workers as child processes and restarts any that
ends on a time-out (see ``docs/worker.md``).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import fields, replace
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy

from ...core.progress import DEFAULT_INTERVAL
from ...core.worker.config import EXIT_RECYCLE
from ...core.worker.health import notify_systemd
from ...core.worker.upkeep import Room
from ...services.worker import MAX_PORT, WorkerOptions, build_worker, worker_queues
from ..base import LedgerCommand, add_http_arguments, float_argument, refused, signals_handled

#: Set in the environment of the children ``--processes`` starts.
CHILD_ENV = "DJANGO_LEDGER_WORKER_CHILD"


class Command(LedgerCommand):
    help = gettext_lazy(
        "Run the ledger's tasks: claim, run, renew, settle and repair, until stopped."
    )  # type: ignore[assignment]  # lazy: the language of each run
    #: Set when the stop left jobs running past --shutdown-timeout: exit without joining them.
    _abandoned = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "queues", nargs="*", help=gettext("queues to serve (default: every task queue)")
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=None,
            help=gettext("jobs at once (default 8, 1 with --processes)"),
        )
        parser.add_argument(
            "--processes", type=int, default=0, help=gettext("run N worker processes")
        )
        parser.add_argument(
            "--prefetch",
            type=int,
            default=None,
            help=gettext("claims held ready beyond the running ones (default: --concurrency)"),
        )
        parser.add_argument(
            "--burst", action="store_true", help=gettext("run what is due now, then exit 0")
        )
        parser.add_argument(
            "--max-tasks", type=int, default=None, help=gettext("exit 0 after this many tasks")
        )
        parser.add_argument(
            "--max-tasks-per-child",
            type=int,
            default=None,
            help=gettext(
                "after starting this many tasks, finish them, give back held claims and "
                "exit 75; --processes starts a new process in its place"
            ),
        )
        parser.add_argument(
            "--max-memory-per-child",
            type=float,
            default=None,
            metavar="MB",
            help=gettext(
                "once resident memory passes this many MiB, recycle the same way (checked "
                "after each settle round)"
            ),
        )
        parser.add_argument(
            "--cancel-grace",
            type=float,
            default=None,
            metavar="SECONDS",
            help=gettext(
                "with --processes: a task still running this many seconds after it was "
                "cancelled ends its worker process, and another takes its place (default: "
                "the task runs on until it checks)"
            ),
        )
        parser.add_argument(
            "--worker-id", default=None, help=gettext("this worker's id (default: host:pid:random)")
        )
        float_argument(
            parser,
            "--shutdown-timeout",
            30.0,
            gettext("seconds running tasks get to finish on a stop (default 30)"),
        )
        float_argument(
            parser,
            "--progress-interval",
            DEFAULT_INTERVAL,
            gettext(
                "seconds between two writes of a running task's progress and metadata "
                "(0.05 to 60, default 1)"
            ),
        )
        parser.add_argument(
            "--no-repair",
            action="store_true",
            help=gettext("do not run repair sweeps in this worker"),
        )
        parser.add_argument(
            "--no-relay",
            action="store_true",
            help=gettext("do not deliver outbox rows in this worker (ledger_relay does it then)"),
        )
        parser.add_argument(
            "--no-counters",
            action="store_true",
            help=gettext(
                "keep no counters for the admin's charts (LEDGER['COUNTERS'] = False does too)"
            ),
        )
        parser.add_argument(
            "--reload", action="store_true", help=gettext("restart when code changes (development)")
        )
        add_http_arguments(
            parser,
            gettext(
                "serve /healthz, /readyz and (with prometheus-client) Prometheus /metrics "
                "on this port"
            ),
            gettext("the shortest lease, at least 10"),
        )
        parser.add_argument(
            "--scheduler", action="store_true", help=gettext("run the scheduler in this worker too")
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self._log_to_stdout(options["verbosity"])
        grace = options["cancel_grace"]
        if grace is not None and not os.environ.get(CHILD_ENV):
            if not options["processes"]:
                raise CommandError(
                    gettext(
                        "--cancel-grace needs --processes: only a worker process that its "
                        "parent replaces may be ended for a cancelled task"
                    )
                )
            if not grace >= 0:
                raise CommandError(
                    gettext("--cancel-grace must be 0 or more seconds, got %(grace)s")
                    % {"grace": grace}
                )
        if options["processes"] and not os.environ.get(CHILD_ENV):
            raise SystemExit(self._supervise(options))
        if options["reload"]:
            from django.utils import autoreload

            autoreload.run_with_reloader(lambda: self._serve(options))
            return
        code = self._serve(options)
        if code or self._abandoned:
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # a time-out or a forced stop: do not wait for stuck threads

    # -- one worker --------------------------------------------------------------------

    def _serve(self, options: dict[str, Any]) -> int:
        child = bool(os.environ.get(CHILD_ENV))
        # Each option of a WorkerOptions field's name is that field; the rest say more.
        given = {f.name: options[f.name] for f in fields(WorkerOptions) if f.name in options}
        worker_options = replace(
            WorkerOptions(**given),
            concurrency=options["concurrency"] or (1 if child else 8),
            exit_on_timeout=child,
            cancel_grace=options["cancel_grace"] if child else None,
            repair=not options["no_repair"],
            relay=not options["no_relay"],
            counters=not options["no_counters"],
        )
        rooms: list[Room] = []
        if worker_options.relay:  # a room beside repair, in the repairer's thread
            from ...services.relay import worker_relay

            relay = worker_relay(burst=worker_options.burst)
            if relay is not None:
                rooms.append(relay)
        with refused(ValueError):
            worker = build_worker(worker_options, rooms)
        scheduler = self._scheduler(options["scheduler"])
        if child:
            _stop_with_parent(worker.request_stop)
        watchdog = notify_systemd(worker.loop_age)  # Type=notify, WatchdogSec=
        # SIGTERM or SIGINT asks the worker to stop; a second one stops it at once.
        with signals_handled(lambda signum, frame: worker.request_stop()):
            try:
                code = worker.run()
                self._abandoned = worker.abandoned
            finally:
                watchdog.set()
                if scheduler is not None:
                    scheduler.set()
        return code

    def _scheduler(self, wanted: bool) -> threading.Event | None:
        if not wanted:
            return None
        try:
            from ...services.scheduler import start_scheduler_thread
        except ImportError as exc:
            raise CommandError(
                gettext("the scheduler is not available: %(exc)s") % {"exc": exc}
            ) from exc
        stop = threading.Event()
        start_scheduler_thread(stop)
        return stop

    def _log_to_stdout(self, verbosity: int) -> None:
        logger = logging.getLogger("django_ledger")
        if verbosity == 0 or logging.getLogger("django_ledger.worker").hasHandlers():
            return  # the project's LOGGING decides
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbosity > 2 else logging.INFO)

    # -- --processes N -----------------------------------------------------------------

    def _supervise(self, options: dict[str, Any]) -> int:
        """Run N children and restart one that ends on a time-out (or dies) until stopped."""
        count = options["processes"]
        if count < 1:
            raise CommandError(gettext("--processes must be at least 1"))
        with refused(ValueError):  # unknown queues, before starting anything
            worker_queues(options["queues"])
        port = options["metrics_port"]
        if port and port + count - 1 > MAX_PORT:  # child k serves on port + k
            raise CommandError(
                gettext(
                    "--metrics-port %(port)s with --processes %(count)s needs ports %(port)s to "
                    "%(last)s, past %(max_port)s: give a lower port"
                )
                % {"port": port, "count": count, "last": port + count - 1, "max_port": MAX_PORT}
            )
        env = {**os.environ, CHILD_ENV: "1"}
        stopping = threading.Event()
        forced = threading.Event()
        tick = threading.Event()  # never set: a wait with a time-out between looks
        children: dict[int, subprocess.Popen[bytes]] = {}

        def start(slot: int) -> None:
            # A session of its own: a Ctrl-C at the terminal reaches the parent alone,
            # which passes one SIGTERM on (two would stop a child at once).
            argv = [sys.executable, sys.argv[0], *_child_args(sys.argv[1:], slot)]
            children[slot] = subprocess.Popen(argv, env=env, start_new_session=True)

        def stop(signum: int, frame: Any) -> None:
            if stopping.is_set():
                forced.set()
            stopping.set()
            for child in children.values():
                if child.poll() is None:
                    child.send_signal(signal.SIGKILL if forced.is_set() else signal.SIGTERM)

        with signals_handled(stop):
            for slot in range(count):
                start(slot)
            while True:
                alive = False
                for slot, child in list(children.items()):
                    code = child.poll()
                    if code is None:
                        alive = True
                        continue
                    if code == EXIT_RECYCLE and not stopping.is_set():
                        # Recycled (--max-tasks-per-child, --max-memory-per-child): always
                        # replaced, burst or not; a fresh interpreter, not a fork.
                        self.stdout.write(
                            gettext("worker process %(pid)s recycled; starting another")
                            % {"pid": child.pid}
                        )
                        start(slot)
                        alive = True
                        continue
                    if stopping.is_set() or options["burst"] or options["max_tasks"]:
                        continue
                    self.stderr.write(
                        gettext("worker process %(pid)s ended (%(code)s); starting another")
                        % {"pid": child.pid, "code": code}
                    )
                    start(slot)
                    alive = True
                if not alive:
                    break
                tick.wait(0.1)
        codes = [child.returncode for child in children.values()]
        return 1 if forced.is_set() else (0 if stopping.is_set() else max(codes, default=0))


def _child_args(args: list[str], slot: int) -> list[str]:
    """The command line of child ``slot``: no ``--processes``, its own metrics port.

    Child k serves metrics on ``--metrics-port`` + k, so N children never race for one.
    """
    out: list[str] = []
    items = iter(args)
    for arg in items:
        name, _, value = arg.partition("=")
        if name not in ("--processes", "--metrics-port"):
            out.append(arg)
            continue
        if not value:
            value = next(items, "")
        if name == "--metrics-port" and value.isdecimal():
            out += ["--metrics-port", str(int(value) + slot)]
    return out


def _stop_with_parent(request_stop: Any) -> None:
    """In a ``--processes`` child: stop cleanly if the parent goes away."""
    parent = os.getppid()
    tick = threading.Event()

    def watch() -> None:
        while not tick.wait(1.0):
            if os.getppid() != parent:
                request_stop()
                return

    threading.Thread(target=watch, name="ledger-parent-watch", daemon=True).start()
