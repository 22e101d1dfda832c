"""Prometheus metrics of a worker, with ``prometheus-client`` installed (the ``metrics`` extra).

The names and meanings are the counters' (``core/counters.py``) that the admin's charts
and the API's series read: ``ledger_tasks`` by ``outcome`` (completed, failed, retry,
lost), ``ledger_task_seconds`` with the same bucket edges, ``ledger_queue_depth`` (PENDING
records, the depth chart's ``pending``) and ``ledger_queue_records`` by ``state``
(``pending_due``, ``claimed``, ``dead``: the depth chart's lines), which ``records``
sets from each depth sample the counters' flush takes (``Counters.on_sample``).

``PrometheusMetrics`` implements the runtime's ``Metrics``; ``page(registry)`` renders them
for ``/metrics`` beside the probes (``core/probes.py``), on the loopback address unless
told otherwise. Without the package, ``available()`` is false and the worker runs
without metrics (its probes still answer).
"""

from __future__ import annotations

import importlib
from typing import Any

from ..counters import EDGES, Depth

__all__ = ["DEFAULT_ADDRESS", "PrometheusMetrics", "available", "page", "serve"]

#: Where metrics are served unless told otherwise: this host only. The page names every
#: queue and task and needs no credentials, so serving it on every interface is a choice
#: to make (``--metrics-address 0.0.0.0`` in a container whose port is not published).
DEFAULT_ADDRESS = "127.0.0.1"

# Imported by name, so the module type-checks the same with and without the extra.
_prometheus: Any  # the ``prometheus_client`` module, or None
try:  # pragma: no cover - depends on what is installed
    _prometheus = importlib.import_module("prometheus_client")
except ImportError:  # pragma: no cover
    _prometheus = None

#: What to install when ``prometheus_client`` does not import.
INSTALL = "install prometheus-client (pip install 'django-task-ledger[metrics]')"


def available() -> bool:
    """Whether ``prometheus_client`` imports."""
    return _prometheus is not None


class PrometheusMetrics:
    """Counters and histograms by queue, task and outcome, on one registry."""

    def __init__(self, registry: Any = None) -> None:
        if _prometheus is None:
            raise RuntimeError(INSTALL)
        registry = registry if registry is not None else _prometheus.REGISTRY
        self.registry = registry
        self._tasks = _prometheus.Counter(
            "ledger_tasks",
            "Tasks settled, by queue, task and outcome (completed, failed, retry, lost).",
            ["queue", "task", "outcome"],
            registry=registry,
        )
        self._seconds = _prometheus.Histogram(
            "ledger_task_seconds",
            "Run time of a task attempt, by queue and task.",
            ["queue", "task"],
            registry=registry,
            buckets=EDGES,  # the same as the counters' run time histogram (core/counters.py)
        )
        self._lost = _prometheus.Counter(
            "ledger_lost_leases",
            "Claims whose lease was lost (a renewal or a settlement answered LOST).",
            ["queue"],
            registry=registry,
        )
        self._in_flight = _prometheus.Gauge(
            "ledger_in_flight",
            "Claims this worker holds (running or prefetched).",
            registry=registry,
        )
        self._depth = _prometheus.Gauge(
            "ledger_queue_depth", "PENDING records of a queue.", ["queue"], registry=registry
        )

        self._data_losses = _prometheus.Counter(
            "ledger_redis_data_losses",
            "Times this worker found that Redis had lost the ledger's data (epoch.py).",
            registry=registry,
        )
        self._records = _prometheus.Gauge(
            "ledger_queue_records",
            "Records of a queue by state (pending_due, claimed, dead), as last sampled.",
            ["queue", "state"],
            registry=registry,
        )

    def outcome(self, queue: str, name: str, outcome: str, seconds: float | None) -> None:
        self._tasks.labels(queue, name or "-", outcome).inc()
        if seconds is not None:
            self._seconds.labels(queue, name or "-").observe(seconds)

    def lost(self, queue: str) -> None:
        self._lost.labels(queue).inc()

    def in_flight(self, count: int) -> None:
        self._in_flight.set(count)

    def depth(self, queue: str, pending: int) -> None:
        self._depth.labels(queue).set(pending)

    def data_lost(self) -> None:
        self._data_losses.inc()

    def records(self, queue: str, depth: Depth) -> None:
        """Set the queue's gauges from a depth sample (what the depth chart draws)."""
        self._depth.labels(queue).set(depth.pending)
        for state, value in (
            ("pending_due", depth.due),
            ("claimed", depth.claimed),
            ("dead", depth.dead),
        ):
            self._records.labels(queue, state).set(value)


def page(registry: Any = None) -> tuple[bytes, str]:
    """The exposition of ``registry`` (the default one: the process's own): bytes, type."""
    if _prometheus is None:
        raise RuntimeError(INSTALL)
    chosen = registry if registry is not None else _prometheus.REGISTRY
    return _prometheus.generate_latest(chosen), _prometheus.CONTENT_TYPE_LATEST


def serve(port: int, metrics: PrometheusMetrics, addr: str = DEFAULT_ADDRESS) -> None:
    """Serve ``/metrics`` on ``addr:port`` from a daemon thread."""
    if _prometheus is None:
        raise RuntimeError(INSTALL)
    _prometheus.start_http_server(port, addr=addr, registry=metrics.registry)
