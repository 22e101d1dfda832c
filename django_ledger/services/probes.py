"""The probes' HTTP server of ``ledger_worker`` and ``ledger_scheduler``, on the metrics address.

``/healthz`` and ``/readyz`` answer with or without ``prometheus-client``; ``/metrics``
only with it (``core/probes.py`` says what each answer means).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from ..core.probes import DEFAULT_MAX_OUTAGE, ProbeServer, Verdict, liveness
from ..core.worker import metrics as prometheus

__all__ = [
    "MAX_PORT",
    "MIN_HEALTHZ_AGE",
    "check_bounds",
    "check_port",
    "scheduler_probes",
    "serve_probes",
]

log = logging.getLogger("django_ledger.worker")

#: The highest TCP port.
MAX_PORT = 65535

#: ``/healthz`` allows a loop at least this many seconds without a turn.
MIN_HEALTHZ_AGE = 10.0


def check_port(port: int | None, address: str | None) -> None:
    """Refuse a port out of range, or an address without its port (``ValueError``)."""
    if port is None:
        if address is not None:
            raise ValueError("--metrics-address needs --metrics-port: give the port too")
        return
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
        raise ValueError(f"--metrics-port must be a port from 0 to {MAX_PORT}, got {port!r}")


def check_bounds(max_age: float | None, max_outage: float | None) -> None:
    """Refuse a probe bound that is not a positive number of seconds (``ValueError``)."""
    for flag, value in (("--healthz-max-age", max_age), ("--readyz-max-outage", max_outage)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{flag} must be more than 0 seconds, got {value!r}")


def serve_probes(
    port: int,
    address: str | None,
    healthz: Callable[[], Verdict],
    readyz: Callable[[], Verdict],
    registry: Any = None,
) -> ProbeServer:
    """Serve the probes, and ``/metrics`` of ``registry`` when ``prometheus-client`` imports.

    ``ValueError`` when the address cannot be bound.
    """
    address = prometheus.DEFAULT_ADDRESS if address is None else address
    page = None
    if prometheus.available():
        page = lambda: prometheus.page(registry)  # noqa: E731 - a one-line route
    else:
        log.warning(
            "no /metrics on %s:%s (only /healthz and /readyz): %s",
            address,
            port,
            prometheus.INSTALL,
        )
    try:
        return ProbeServer(address, port, healthz, readyz, page)
    except OSError as exc:
        raise ValueError(f"cannot serve metrics on {address}:{port}: {exc}") from exc


def scheduler_probes(
    runner: Any,
    stop: threading.Event,
    interval: float,
    *,
    port: int | None,
    address: str | None,
    max_age: float | None,
    max_outage: float | None,
) -> ProbeServer | None:
    """Serve a ``Scheduler``'s probes (``None`` without a port); ``ValueError`` if refused.

    ``/healthz``'s default bound is three intervals, at least ``MIN_HEALTHZ_AGE``: the
    loop turns at least once an interval (once a second while Redis is away).
    """
    check_port(port, address)
    check_bounds(max_age, max_outage)
    if port is None:
        return None
    age = max_age or max(MIN_HEALTHZ_AGE, 3 * interval)
    outage = max_outage or DEFAULT_MAX_OUTAGE
    turns, contact = runner.turns, runner.contact
    return serve_probes(
        port,
        address,
        lambda: liveness(turns.age(), age),
        lambda: contact.readiness(outage, stop.is_set(), None),
    )
