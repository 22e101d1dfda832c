"""Check-ins to a schedule's monitor, sent off the scheduler's tick and the worker's loop.

A schedule's ``Monitor`` names a ping URL (healthchecks.io style: ``/start`` when a
fire's task starts, the bare URL when it completes, ``/fail`` when it fails) or a Sentry
Crons monitor slug (``in_progress``, ``ok``, ``error`` check-ins through ``sentry_sdk``),
or both. Every check-in of one fire carries the same run id, made from the fire's
request id, so attempts on different workers report one run.

``Pinger`` owns one daemon thread and a bounded queue: ``put`` never blocks and never
raises; a full queue drops the check-in, a check-in that fails or times out is logged
(the URL's host only: a ping URL holds its token) and counted. Nothing here raises into
the tick or the settlement that asked for a check-in.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .fires import MACROS, Cron, Every, Timing

__all__ = [
    "PING_TIMEOUT_S",
    "QUEUE_SIZE",
    "Monitor",
    "Pinger",
    "fired_schedule",
    "host_of",
    "run_id",
    "sentry_config",
]

logger = logging.getLogger("django_ledger.monitor")

#: How long one ping may take before it counts as failed.
PING_TIMEOUT_S: Final = 5.0
#: Check-ins waiting to be sent at most; more are dropped (and counted).
QUEUE_SIZE: Final = 1000
#: How long a process's exit waits for the check-ins still queued.
EXIT_FLUSH_S: Final = 2.0
#: What each kind of check-in is to a ping URL (a suffix) and to Sentry (a status).
_SUFFIX: Final = {"start": "/start", "ok": "", "error": "/fail"}
_STATUS: Final = {"start": "in_progress", "ok": "ok", "error": "error"}
_SENTRY_UNITS: Final = (("week", 604_800), ("day", 86_400), ("hour", 3_600), ("minute", 60))


@dataclass(frozen=True)
class Monitor:
    """Where a schedule's fires check in: a ping URL, a Sentry monitor slug, or both."""

    url: str | None = None
    sentry: str | None = None
    #: Sentry's ``monitor_config`` (the schedule and its time zone), sent with each
    #: check-in so Sentry creates or updates the monitor; ``None`` when Sentry cannot
    #: say the schedule (a cron with seconds, an interval not in whole minutes).
    sentry_config: dict[str, Any] | None = field(default=None, compare=False)

    def __repr__(self) -> str:  # the URL holds a token: show its host only
        url = None if self.url is None else host_of(self.url)
        return f"Monitor(url={url!r}, sentry={self.sentry!r})"


def run_id(request_id: str) -> uuid.UUID:
    """The run id of the fire ``request_id``: the same in every process."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"django-ledger:{request_id}")


def fired_schedule(request_id: str) -> tuple[str, ...]:
    """The schedule keys ``request_id`` may be a fire of (``schedule:{key}:{epoch}``, or
    ``schedule:{key}:manual:{epoch}``), most likely first; ``()`` for any other id."""
    head, _, epoch = request_id.rpartition(":")
    if not head.startswith("schedule:") or not epoch.isdecimal():
        return ()
    key = head[len("schedule:") :]
    if not key:
        return ()
    base, _, word = key.rpartition(":")
    return (key, base) if word == "manual" and base else (key,)


def host_of(url: str) -> str:
    """The host of ``url``, all a log line says of it."""
    try:
        return urllib.parse.urlsplit(url).hostname or "?"
    except ValueError:
        return "?"


def sentry_config(timing: Timing, cron: str | None) -> dict[str, Any] | None:
    """Sentry's ``monitor_config`` for a schedule, or ``None`` if Sentry cannot say it."""
    schedule: dict[str, Any]
    if isinstance(timing, Cron) and cron is not None:
        expression = MACROS.get(cron.strip().lower(), cron.strip())
        if len(expression.split()) != 5:
            return None
        schedule, zone = {"type": "crontab", "value": expression}, timing.zone
    elif isinstance(timing, Every) and timing.seconds % 60 == 0:
        seconds = timing.seconds
        unit, size = next((u, s) for u, s in _SENTRY_UNITS if seconds % s == 0)
        schedule, zone = {"type": "interval", "value": seconds // size, "unit": unit}, timing.zone
    else:
        return None
    return {"schedule": schedule, "timezone": str(zone)}


class Pinger:
    """One sender thread per process, fed by a bounded queue of check-ins."""

    def __init__(self, size: int = QUEUE_SIZE, timeout: float = PING_TIMEOUT_S) -> None:
        self.size, self.timeout = size, timeout
        self._lock = threading.Lock()
        self._pid = -1
        self._queue: queue.Queue[Callable[[], None]] = queue.Queue(size)
        #: Check-ins sent, failed (error, time-out, refused) and dropped (queue full).
        self.sent = self.failed = self.dropped = 0

    def check_in(self, monitor: Monitor, kind: str, request_id: str, note: str = "") -> bool:
        """Queue check-in ``kind`` (``start``, ``ok``, ``error``) of fire ``request_id``.

        Answer whether it was queued; never blocks, never raises.
        """
        if monitor.url is not None:
            url = monitor.url
            if not self.put(lambda: self._ping(url, kind, request_id, note)):
                return False
        if monitor.sentry is not None:
            slug, config = monitor.sentry, monitor.sentry_config
            return self.put(lambda: _sentry(slug, kind, request_id, config))
        return True

    def put(self, send: Callable[[], None]) -> bool:
        """Queue ``send`` for the sender thread; answer whether it was queued."""
        try:
            self._started().put_nowait(send)
        except queue.Full:
            with self._lock:
                self.dropped += 1
            logger.warning("monitor check-in dropped: %d already wait to be sent", self.size)
            return False
        return True

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the queue to be sent; answer whether it was."""
        waiting = self._queue
        with waiting.all_tasks_done:
            return waiting.all_tasks_done.wait_for(lambda: not waiting.unfinished_tasks, timeout)

    def _started(self) -> queue.Queue[Callable[[], None]]:
        with self._lock:
            if self._pid != os.getpid():  # first use, or a forked child: its own thread
                self._pid = os.getpid()
                self._queue = queue.Queue(self.size)
                waiting = self._queue
                threading.Thread(
                    target=self._run, args=(waiting,), name="ledger-monitor", daemon=True
                ).start()
                atexit.register(self.flush, EXIT_FLUSH_S)
            return self._queue

    def _run(self, waiting: queue.Queue[Callable[[], None]]) -> None:
        while True:
            send = waiting.get()
            try:
                send()
            except Exception as exc:
                with self._lock:
                    self.failed += 1
                logger.warning("monitor check-in failed: %s", exc)
            else:
                with self._lock:
                    self.sent += 1
            finally:
                waiting.task_done()

    def _ping(self, url: str, kind: str, request_id: str, note: str) -> None:
        query = urllib.parse.urlencode({"rid": str(run_id(request_id))})
        target = f"{url.rstrip('/')}{_SUFFIX[kind]}?{query}"
        body = f"{request_id} {note}".strip().encode()
        request = urllib.request.Request(target, data=body, method="POST")
        request.add_header("Content-Type", "text/plain; charset=utf-8")
        request.add_header("User-Agent", "django-ledger")
        host = host_of(url)
        try:
            with _OPENER.open(request, timeout=self.timeout) as answer:
                answer.read(1024)
        except urllib.error.HTTPError as exc:  # its text would name the URL: say the code
            raise PingError(f"{kind} ping to {host}: HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PingError(f"{kind} ping to {host}: {type(reason).__name__}") from None


class _Refused(urllib.request.HTTPRedirectHandler):
    """Follow no redirect: a ping goes where the settings say, or fails."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER: Final = urllib.request.build_opener(_Refused)


class PingError(Exception):
    """A check-in that did not go through, said without its URL."""


def _sentry(slug: str, kind: str, request_id: str, config: dict[str, Any] | None) -> None:
    from sentry_sdk.crons import capture_checkin  # optional: the checks require it

    capture_checkin(
        monitor_slug=slug,
        check_in_id=run_id(request_id).hex,
        status=_STATUS[kind],
        monitor_config=config,  # type: ignore[arg-type]
    )
