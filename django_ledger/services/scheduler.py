"""The scheduler from settings: what ``ledger_scheduler``, ``ledger_worker --scheduler`` and the
admin call.

``Scheduler`` ticks the schedules of ``LEDGER['SCHEDULES']`` (read afresh at every tick) on
this node; ``start_scheduler_thread`` runs one in a daemon thread until an event is set.
``explain``, ``pause``, ``resume`` and ``trigger`` are the operator's tools. The logic is
Django-free in ``django_ledger.core.schedule``; ``docs/scheduler.md`` explains it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from ..conf import dispatch_node_id, get_dispatch_registry, ledger_settings
from ..core.errors import LedgerError
from ..core.probes import Contact, Turns
from ..core.results import AdmissionStatus
from ..core.schedule import (
    PUBLISH_TTL_MS,
    Definitions,
    Fire,
    Pause,
    Running,
    Schedule,
    SchedulerLoop,
    Snapshot,
    Ticker,
    TickReport,
    datetime_of,
)
from ..schedules.admission import admit_fire
from ..schedules.config import ScheduleConfig
from .schedule_sources import schedules, store, stored, typed

__all__ = [
    "KILL_AFTER_CLAIM_ENV",
    "Explanation",
    "Scheduler",
    "explain",
    "manual_key",
    "pause",
    "report_lines",
    "resume",
    "running",
    "schedules",
    "start_scheduler_thread",
    "state",
    "store",
    "trigger",
]

logger = logging.getLogger("django_ledger.scheduler")

#: Test hook: a schedule key; the process SIGKILLs itself after claiming a fire of it,
#: before admitting it (the crash window the design must survive).
KILL_AFTER_CLAIM_ENV: Final = "LEDGER_SCHEDULER_KILL_AFTER_CLAIM"


def manual_key(key: str) -> str:
    """The dispatch registry key of ``key``'s manual fires (kept apart from its schedule)."""
    return f"{key}:manual"


class Scheduler:
    """This node's scheduler: a ticker over the configured schedules.

    ``node_id`` defaults to ``LEDGER['DISPATCH']['NODE_ID']`` (host name and process id).
    """

    def __init__(self, node_id: str | None = None) -> None:
        self.node_id = node_id or dispatch_node_id()
        self._configs: dict[str, ScheduleConfig] = {}
        #: The stored schedules, typed, and the stamp they were read at (None: not yet).
        self._stored: dict[str, ScheduleConfig] = {}
        self._stored_stamp: int | None = None
        #: How long this node's publication outlives a tick (``run`` raises it for a slow loop).
        self.publish_ttl_ms = PUBLISH_TTL_MS
        #: The loop's turns and whether Redis answers its ticks: ``/healthz``, ``/readyz``.
        self.turns = Turns()
        self.contact = Contact()
        self.ticker = Ticker(
            store(),
            get_dispatch_registry(),
            self._admit,
            self.node_id,
            after_claim=_kill_hook(),
            count=ledger_settings.counters,
        )

    def tick(self) -> TickReport:
        """Run one tick over the schedules the settings configure now, and publish them.

        The publication (one script call) is what the admin's Schedules page shows of
        this node: every schedule it runs, whatever the web process's settings say.
        """
        report = self.ticker.tick(self._schedules)
        now = report.now_ms // 1000
        published = [
            Running(
                key=config.key,
                task=config.task,
                queue=config.queue,
                cron=config.cron,
                every=config.every,
                timezone=config.timezone,
                next_fire=config.timing.next_after(now) if config.enabled else None,
                enabled=config.enabled,
            )
            for config in self._configs.values()
        ]
        self.ticker.store.publish(self.node_id, report.now_ms, published, self.publish_ttl_ms)
        return report

    def run(
        self,
        stop: threading.Event,
        *,
        interval: float = 1.0,
        on_report: Callable[[TickReport], None] | None = None,
        on_error: Callable[[LedgerError], None] | None = None,
    ) -> int:
        """Tick until ``stop`` is set; return how many ticks ran."""
        self.publish_ttl_ms = max(PUBLISH_TTL_MS, int(interval * 3000))
        loop = SchedulerLoop(
            self.tick,
            interval=interval,
            on_report=on_report,
            on_error=on_error,
            turns=self.turns,
            contact=self.contact,
        )
        try:
            return loop.run(stop)
        finally:
            try:
                self.ticker.store.unpublish(self.node_id)
            except LedgerError as exc:  # it expires by itself
                logger.warning("could not withdraw this node's published schedules: %s", exc)

    def _schedules(self, snapshot: Snapshot) -> list[Schedule]:
        """The settings' schedules, and the stored ones (reloaded when their stamp moved)."""
        configs = schedules()
        stored: list[Schedule] = []
        if ledger_settings.runtime_schedules:
            if snapshot.stamp != self._stored_stamp:
                found = Definitions(self.ticker.store).load()
                self._stored, self._stored_stamp = typed(found), found.stamp
                logger.info("stored schedules loaded: %s", ", ".join(self._stored) or "none")
            for key, config in self._stored.items():
                if key not in configs:
                    configs[key] = config
                    stored.append(replace(config.schedule, stamp=self._stored_stamp))
        else:
            self._stored, self._stored_stamp = {}, None
        self._configs = configs
        return [c.schedule for k, c in configs.items() if k not in self._stored] + stored

    def _admit(self, fire: Fire) -> AdmissionStatus:
        return admit_fire(fire, self._configs[fire.key])


def start_scheduler_thread(
    stop_event: threading.Event, *, interval: float = 1.0, node_id: str | None = None
) -> threading.Thread:
    """Start a daemon thread that runs a ``Scheduler`` until ``stop_event`` is set.

    Settings problems raise here, before the thread starts; each tick logs what it did
    to the ``django_ledger.scheduler`` logger.
    """
    schedules()  # refuse to start on a bad setting, in the caller's thread
    scheduler = Scheduler(node_id)

    def run() -> None:
        scheduler.run(stop_event, interval=interval, on_report=_log_report)

    thread = threading.Thread(target=run, name="ledger-scheduler", daemon=True)
    thread.start()
    return thread


def _log_report(report: TickReport) -> None:
    for line in report_lines(report):
        logger.info("%s", line)


def report_lines(report: TickReport) -> list[str]:
    """Say what a tick did, one line per fire and per gap left unrun."""
    lines = []
    for event in report.events:
        extra = " (recovered)" if event.recovered else ""
        lines.append(
            f"{event.outcome} {event.fire.request_id} at {event.fire.at.isoformat()}{extra}"
        )
    for key, first, last in report.dropped:
        lines.append(
            f"skipped {key}: missed fires {datetime_of(first).isoformat()} to "
            f"{datetime_of(last).isoformat()} (misfire policy)"
        )
    for key, first, last in report.paused:
        lines.append(
            f"paused {key}: fires {datetime_of(first).isoformat()} to "
            f"{datetime_of(last).isoformat()} not run"
        )
    lines += [f"error {key}: {message}" for key, message in report.errors]
    return lines


def _kill_hook() -> Callable[[Fire], None] | None:
    key = os.environ.get(KILL_AFTER_CLAIM_ENV)
    if not key:
        return None

    def kill(fire: Fire) -> None:
        if fire.key == key:
            print(f"kill-after-claim {fire.request_id}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    return kill


# -- the operator's tools --------------------------------------------------------------


@dataclass(frozen=True)
class Explanation:
    """A schedule in words and its next fires, from ``now`` (epoch seconds)."""

    config: ScheduleConfig
    words: str
    now: int
    server_clock: bool
    fires: list[int]

    def rows(self) -> list[tuple[datetime, datetime]]:
        """Each fire in UTC and in the schedule's time zone."""
        zone = self.config.timing.zone
        return [(datetime_of(f), datetime_of(f).astimezone(zone)) for f in self.fires]


def _config(key: str) -> ScheduleConfig:
    found = schedules(strict=False)
    if key not in found:
        found = {**typed(stored()), **found}
    if key not in found:
        known = ", ".join(map(repr, found)) or "none"
        raise LookupError(f"no schedule {key!r} in LEDGER['SCHEDULES'] or stored (known: {known})")
    return found[key]


def explain(key: str, count: int = 10, now: int | None = None) -> Explanation:
    """Return schedule ``key`` in words with its next ``count`` fires.

    From the Redis server's clock, or this machine's when Redis cannot be reached
    (``server_clock`` says which); ``now`` pins the start.
    """
    config = _config(key)
    server = True
    if now is None:
        try:
            now = store().server_time_ms() // 1000
        except LedgerError:
            now, server = int(datetime.now().timestamp()), False
    fires: list[int] = []
    fire = now
    while len(fires) < count and (found := config.timing.next_after(fire)) is not None:
        fires.append(found)
        fire = found
    return Explanation(config, config.timing.describe(), now, server, fires)


def pause(key: str, by: str) -> Pause:
    """Pause schedule ``key`` on every node, from their next tick."""
    _config(key)
    return store().pause(key, by)


def resume(key: str) -> bool:
    """Resume schedule ``key``; say whether it was paused."""
    _config(key)
    return store().resume(key)


def trigger(key: str, by: str) -> tuple[Fire, AdmissionStatus]:
    """Admit one fire of ``key`` now, apart from its schedule; record it in the registry.

    Its request id is ``schedule:{key}:manual:{epoch}`` and its dispatch record is kept
    under ``{key}:manual``, so it never collides with a scheduled fire of that second; a
    second trigger within the same second is the same fire.
    """
    config = _config(key)
    fire = Fire(key, store().server_time_ms() // 1000, manual=True)
    registry = get_dispatch_registry()
    registry.claim_dispatch(manual_key(key), fire.epoch, f"{dispatch_node_id()} ({by})")
    status = admit_fire(fire, config)
    if status is AdmissionStatus.REJECTED:
        registry.log_dispatch(manual_key(key), fire.epoch, dispatch_node_id(), "failed")
    return fire, status


def state() -> Snapshot:
    """Return the server clock and every schedule's state (for the admin)."""
    return store().snapshot()


def running() -> dict[str, list[Running]]:
    """Return what every live scheduler node runs, by schedule key (for the admin)."""
    found: dict[str, list[Running]] = {}
    for entry in store().running():
        found.setdefault(entry.key, []).append(entry)
    return found
