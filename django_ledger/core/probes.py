"""Liveness and readiness over HTTP: ``/healthz``, ``/readyz`` (and ``/metrics``) of a process.

A worker or a scheduler serves them on its metrics address (``ProbeServer``), from a
thread of its own and with nothing but the standard library, so the probes answer with
or without ``prometheus-client``. Each answer is ``200 ok`` or ``503`` with one short
reason in plain text: it names no queue, task, host or setting, so an address a
platform can reach tells nothing to whoever else reaches it.

- ``/healthz`` (liveness) fails once the process's loop has not turned within a bound:
  a loop stuck in a call is restarted, a loop that waits on Redis is not.
- ``/readyz`` (readiness) fails while the process is stopping (or recycling), and once
  Redis has failed every call for longer than a bound (``Contact``).

``stall_for_tests`` is the documented test seam that holds a loop still.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import LedgerUnavailable

__all__ = [
    "DEFAULT_MAX_OUTAGE",
    "STALL_FILE_ENV",
    "Contact",
    "ProbeServer",
    "Turns",
    "Verdict",
    "liveness",
    "stall_for_tests",
]

#: Seconds Redis may fail every call before ``/readyz`` fails (a blip is not an outage).
DEFAULT_MAX_OUTAGE = 5.0

#: A test seam: while the file this names exists, the main loop stands still (as a loop
#: stuck in a call would), so a test can see a loop fall behind.
STALL_FILE_ENV = "DJANGO_LEDGER_TEST_STALL_FILE"


def stall_for_tests() -> None:
    """Stand still while ``$DJANGO_LEDGER_TEST_STALL_FILE`` exists (unset: return at once)."""
    path = os.environ.get(STALL_FILE_ENV)
    while path and os.path.exists(path):
        time.sleep(0.05)


@dataclass(frozen=True)
class Verdict:
    """One probe's answer: healthy (or ready), or not, and why in a few words."""

    ok: bool
    reason: str = "ok"


class Contact:
    """Whether Redis answers this process: the calls it makes anyway say so, no extra one.

    ``answered`` after a call Redis answered (a refusal is an answer too), ``failed``
    after one it did not; ``outage`` is how long every call has failed, 0 while one
    answered since. Plain attribute writes: cheap on a hot path, safe from any thread.
    """

    def __init__(self) -> None:
        self._failing_since: float | None = None
        self._answered = False

    def answered(self) -> None:
        self._failing_since = None
        self._answered = True

    def failed(self) -> None:
        if self._failing_since is None:
            self._failing_since = time.monotonic()

    def after(self, exc: BaseException) -> None:
        """Note a call that raised ``exc``: unreachable, or an answer (a refusal)."""
        if isinstance(exc, LedgerUnavailable | RedisConnectionError | RedisTimeoutError):
            self.failed()
        else:
            self.answered()

    def outage(self) -> float:
        """Seconds since the first of the failures no answer has followed (0: none)."""
        since = self._failing_since
        return 0.0 if since is None else max(0.0, time.monotonic() - since)

    def readiness(self, max_outage: float, stopping: bool, draining: str | None) -> Verdict:
        """Not ready while stopping or draining, or after an outage past ``max_outage``."""
        if stopping:
            return Verdict(False, "stopping")
        if draining:
            return Verdict(False, "draining")
        if self.outage() > max_outage:
            return Verdict(False, f"redis unreachable for {self.outage():.0f} s")
        if not self._answered:
            return Verdict(False, "starting")
        return Verdict(True)


class Turns:
    """When a loop last turned: the loop notes each turn, ``/healthz`` reads the age."""

    def __init__(self) -> None:
        self._at = time.monotonic()

    def turned(self) -> None:
        self._at = time.monotonic()

    def age(self) -> float:
        return max(0.0, time.monotonic() - self._at)


def liveness(age: float, max_age: float) -> Verdict:
    """Healthy while the loop turned within ``max_age`` seconds."""
    if age > max_age:
        return Verdict(False, f"loop stalled for {age:.0f} s")
    return Verdict(True)


#: What ``/metrics`` serves: the page's bytes and its content type, or ``None`` (404).
Metrics = Callable[[], tuple[bytes, str]]


class ProbeServer:
    """Serve ``/healthz``, ``/readyz`` and (when given) ``/metrics`` from a daemon thread.

    ``port`` 0 takes a free port (``port`` then says which). ``close`` stops serving.
    """

    def __init__(
        self,
        address: str,
        port: int,
        healthz: Callable[[], Verdict],
        readyz: Callable[[], Verdict],
        metrics: Metrics | None = None,
    ) -> None:
        routes: dict[str, Callable[[], tuple[int, bytes, str]]] = {
            "/healthz": lambda: _verdict(healthz()),
            "/readyz": lambda: _verdict(readyz()),
        }
        if metrics is not None:
            routes["/metrics"] = lambda: (200, *metrics())

        handler = type("Handler", (_Handler,), {"routes": routes})  # this server's routes
        self._server = ThreadingHTTPServer((address, port), handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="ledger-probes", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _verdict(verdict: Verdict) -> tuple[int, bytes, str]:
    return (200 if verdict.ok else 503), f"{verdict.reason}\n".encode(), "text/plain; charset=utf-8"


class _Handler(BaseHTTPRequestHandler):
    routes: dict[str, Callable[[], tuple[int, bytes, str]]] = {}
    # Probes come every few seconds: no log line each (the process's own log stays its own).
    server_version = "django-ledger"
    sys_version = ""
    timeout = 5  # a client that sends nothing does not hold a thread for long

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        route = self.routes.get(self.path.split("?", 1)[0])
        if route is None:
            status, content, kind = 404, b"not found\n", "text/plain; charset=utf-8"
        else:
            try:
                status, content, kind = route()
            except Exception as exc:  # a probe that cannot answer is a failing probe
                status, content = 503, f"probe failed: {type(exc).__name__}\n".encode()
                kind = "text/plain; charset=utf-8"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(content)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if body:
            self.wfile.write(content)
