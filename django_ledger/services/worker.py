"""Build a worker from settings: its queues, one handler each, heartbeats and metrics.

``manage.py ledger_worker`` calls ``build_worker``; the runtime itself
(``django_ledger.core.worker``) knows nothing of Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from ..conf import connection, get_ledger, ledger_settings
from ..core.probes import DEFAULT_MAX_OUTAGE, liveness
from ..core.progress import DEFAULT_INTERVAL
from ..core.progress import board as progress_board
from ..core.worker.handler import Backoff, CallableHandler, Handler
from ..core.worker.heartbeat import Heartbeats
from ..core.worker.libraries import OldLibraries
from ..core.worker.recycle import resident_mib
from ..core.worker.runtime import Metrics, Worker, WorkerConfig, default_worker_id
from ..core.worker.upkeep import Room
from ..schedules.watch import task_ended, task_started
from .probes import MAX_PORT, MIN_HEALTHZ_AGE, check_bounds, check_port, serve_probes

__all__ = [
    "MAX_PORT",
    "WorkerOptions",
    "build_worker",
    "heartbeats",
    "task_queues",
    "worker_queues",
]

#: ``--max-memory-per-child`` must leave a fresh worker this much of what it holds at start.
START_HEADROOM = 1.2

#: The task backend class this app provides (``TASKS[alias]['BACKEND']``).
BACKEND_PATH = "django_ledger.tasks.LedgerBackend"


@dataclass
class WorkerOptions:
    """What ``ledger_worker``'s options ask for."""

    queues: list[str] = field(default_factory=list)
    concurrency: int = 8
    prefetch: int | None = None
    burst: bool = False
    max_tasks: int | None = None
    #: Recycle (exit ``EXIT_RECYCLE`` after a drain) after so many tasks started, or past
    #: so many MiB resident: ``--max-tasks-per-child``, ``--max-memory-per-child``.
    max_tasks_per_child: int | None = None
    max_memory_per_child: float | None = None
    worker_id: str | None = None
    shutdown_timeout: float = 30.0
    repair: bool = True
    metrics_port: int | None = None
    #: ``None``: the loopback address (``core.worker.metrics.DEFAULT_ADDRESS``).
    metrics_address: str | None = None
    exit_on_timeout: bool = False
    #: Seconds a cancelled task gets to stop before its process ends (``--cancel-grace``,
    #: ``--processes`` children only); ``None``: no hard stop.
    cancel_grace: float | None = None
    #: Run the outbox relay beside the work (``services/relay.py``): ``--no-relay`` turns it off.
    relay: bool = True
    #: Seconds between two writes of a running task's progress (``--progress-interval``).
    progress_interval: float = DEFAULT_INTERVAL
    #: Keep the counters for the admin's charts (``--no-counters``; ``LEDGER['COUNTERS']``
    #: off turns them off whatever this says).
    counters: bool = True
    #: ``/healthz`` fails once the main loop has not turned for this long (``None``: the
    #: shortest lease of the worker's queues, at least ``MIN_HEALTHZ_AGE``).
    healthz_max_age: float | None = None
    #: ``/readyz`` fails once Redis has failed every call for this long (``None``: 5 s).
    readyz_max_outage: float | None = None


def task_queues() -> list[str]:
    """The queues of every ``LedgerBackend`` in ``TASKS``, in the order they are named.

    A backend whose ``QUEUES`` is empty takes any queue (Django's meaning): then every
    queue of ``LEDGER['QUEUES']`` that has no raw ``HANDLER``.
    """
    found: dict[str, None] = {}
    for alias in ledger_backends():
        any_queue = [q for q, o in ledger_settings.queues.items() if "HANDLER" not in o]
        found.update(dict.fromkeys(alias.get("QUEUES") or any_queue))
    return list(found)


def ledger_backends() -> list[dict[str, Any]]:
    """The ``TASKS`` entries whose ``BACKEND`` is a ``LedgerBackend``, in order."""
    tasks = getattr(settings, "TASKS", {}) or {}
    paths = {BACKEND_PATH, "django_ledger.tasks.backend.LedgerBackend"}
    return [
        alias
        for alias in (tasks.values() if isinstance(tasks, dict) else ())
        if isinstance(alias, dict) and alias.get("BACKEND") in paths
    ]


def worker_queues(names: list[str]) -> list[str]:
    """The queues a worker serves: those named, else every task queue and raw queue."""
    configured = ledger_settings.queues
    if names:
        unknown = [name for name in names if name not in configured]
        if unknown:
            known = ", ".join(repr(name) for name in configured) or "none"
            raise ValueError(
                f"unknown queue(s) {', '.join(map(repr, unknown))}; LEDGER['QUEUES'] has: {known}"
            )
        return list(dict.fromkeys(names))
    chosen = [queue for queue in task_queues() if queue in configured]
    chosen += [q for q, o in configured.items() if "HANDLER" in o and q not in chosen]
    if not chosen:
        raise ValueError(
            "no queue to serve: name one (ledger_worker QUEUE), give a queue a HANDLER, or "
            f"configure TASKS with {BACKEND_PATH!r}"
        )
    return chosen


def handler_for(queue: str) -> Handler:
    """The raw ``HANDLER`` of ``queue`` if it has one, else the Django task handler."""
    overrides = ledger_settings.queues[queue]
    config = ledger_settings.queue(queue)
    path = overrides.get("HANDLER")
    if path is not None:
        try:
            func = import_string(path)
        except ImportError as exc:
            raise ValueError(f"LEDGER['QUEUES'][{queue!r}]['HANDLER'] = {path!r}: {exc}") from exc
        base = _seconds(overrides.get("BACKOFF_BASE"), Backoff.base)
        cap = _seconds(overrides.get("BACKOFF_CAP"), max(Backoff.cap, base))
        timeout = overrides.get("TIMEOUT")
        return CallableHandler(
            func,
            max_attempts=config.max_attempts,
            backoff=Backoff(base, cap),
            timeout=None if timeout is None else _seconds(timeout, 0.0),
        )
    try:
        from ..tasks.handler import TaskHandler
    except ImportError as exc:
        raise ValueError(f"queue {queue!r} runs Django tasks, but they cannot load: {exc}") from exc
    return TaskHandler(queue)


def _seconds(value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def heartbeats(counters: bool = True) -> Heartbeats:
    """Where this project's workers write their heartbeats (and counters, if kept)."""
    return Heartbeats(
        connection(), ledger_settings.namespace, counters=counters and ledger_settings.counters
    )


def build_worker(options: WorkerOptions, rooms: Sequence[Room] = ()) -> Worker:
    """Build the worker ``options`` describe; ``ValueError`` says what is wrong.

    ``rooms`` are beaten beside repair, in the repairer's thread (the outbox relay:
    ``services.relay.worker_relay``).
    """
    try:
        queues = worker_queues(options.queues)
        ledgers = {queue: get_ledger(queue) for queue in queues}
        leases = {queue: ledger_settings.queue(queue).lease.total_seconds() for queue in queues}
        handlers = {queue: handler_for(queue) for queue in queues}
        beats = heartbeats(options.counters)
        # Beside repair, in the repairer's thread: what running tasks reported, coalesced;
        # other versions' function libraries, dropped at start and once a day.
        progress_room = progress_board.room(options.progress_interval)
        libraries_room = OldLibraries(ledger.redis for ledger in ledgers.values())
    except ImproperlyConfigured as exc:
        raise ValueError(str(exc)) from exc
    config = WorkerConfig(
        worker_id=options.worker_id or default_worker_id(),
        concurrency=options.concurrency,
        prefetch=options.prefetch,
        burst=options.burst,
        max_tasks=options.max_tasks,
        max_tasks_per_child=options.max_tasks_per_child,
        max_memory_per_child=_memory_limit(options.max_memory_per_child),
        shutdown_timeout=options.shutdown_timeout,
        repair=options.repair,
        heartbeats=beats,
        exit_on_timeout=options.exit_on_timeout,
        cancel_grace=options.cancel_grace,
        rooms=(*rooms, progress_room, libraries_room),
        started=task_started,
        ended=task_ended,
    )
    check_port(options.metrics_port, options.metrics_address)
    check_bounds(options.healthz_max_age, options.readyz_max_outage)
    metrics = _metrics(options)
    if metrics is not None and hasattr(metrics, "records"):
        # The queue-records gauge is set from each depth sample the counters' flush takes.
        beats.counters.on_sample = metrics.records
    worker = Worker(ledgers, handlers, leases, config, metrics=metrics)
    if options.metrics_port is not None:
        # By default the shortest lease, at least ``MIN_HEALTHZ_AGE``: a loop that has not
        # turned for a lease may have held claims past it unrenewed.
        max_age = options.healthz_max_age or max(MIN_HEALTHZ_AGE, min(leases.values()))
        max_outage = options.readyz_max_outage or DEFAULT_MAX_OUTAGE
        serve_probes(
            options.metrics_port,
            options.metrics_address,
            lambda: liveness(worker.loop_age(), max_age),
            lambda: worker.readiness(max_outage),
            getattr(metrics, "registry", None),
        )
    return worker


def _memory_limit(limit: float | None) -> float | None:
    """Refuse a memory limit a fresh worker (Django and the handlers loaded) nearly holds."""
    if limit is None or not limit > 0:
        return limit  # None, or refused by WorkerConfig
    holds = resident_mib()
    if limit < START_HEADROOM * holds:
        raise ValueError(
            f"--max-memory-per-child {limit:g} MiB leaves no room: a fresh worker already "
            f"holds {holds:.0f} MiB; give at least {START_HEADROOM * holds:.0f}"
        )
    return limit


def _metrics(options: WorkerOptions) -> Metrics | None:
    """The worker's Prometheus metrics, with a metrics port and ``prometheus-client``."""
    from ..core.worker import metrics

    if options.metrics_port is None or not metrics.available():
        return None  # the probes are served without it (``serve_probes`` says so)
    return cast(Metrics, metrics.PrometheusMetrics())
