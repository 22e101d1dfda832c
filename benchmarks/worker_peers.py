"""The peers ``benchmarks/worker_bench.py`` drains beside ``ledger_worker``: a no-op each.

Used by the peers' own worker commands (and by the bench, to enqueue), in the
benchmark's scratch virtualenv only (``.venv-bench``: huey, dramatiq, rq and celery are
not dependencies of the project). ``BENCH_REDIS_URL`` names the bench's private
redis-server. Every peer runs with its defaults but for the pool its command line gives.

Each peer's app is built on first access (PEP 562 ``__getattr__``), so that importing
this module costs nothing: RQ's default worker forks a work horse per job, which imports
the job's module afresh, and must not pay for the other three peers' imports.

* huey: ``huey_consumer benchmarks.worker_peers.huey -w 1 -k thread``;
* dramatiq: ``dramatiq benchmarks.worker_peers:broker --processes 1 --threads 8``;
* RQ: ``rq worker --burst``, the job ``benchmarks.worker_peers.rq_noop``;
* Celery: ``celery -A benchmarks.worker_peers:celery worker --pool threads -c 8``.
"""

from __future__ import annotations

import os
from typing import Any

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:1/0")

_built: dict[str, Any] = {}


def rq_noop() -> None:
    """Nothing (RQ enqueues it by its dotted path)."""


def _huey() -> dict[str, Any]:
    from huey import RedisHuey

    huey = RedisHuey("bench", url=URL)

    @huey.task()
    def huey_noop() -> None:
        """Nothing (huey stores no result for ``None``)."""

    return {"huey": huey, "huey_noop": huey_noop}


def _dramatiq() -> dict[str, Any]:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=URL)
    dramatiq.set_broker(broker)

    @dramatiq.actor(actor_name="dramatiq_noop")
    def dramatiq_noop() -> None:
        """Nothing."""

    return {"broker": broker, "dramatiq_noop": dramatiq_noop}


def _celery() -> dict[str, Any]:
    from celery import Celery

    celery = Celery("bench", broker=URL)  # no result backend: Celery's default

    @celery.task(name="bench.noop")
    def celery_noop() -> None:
        """Nothing."""

    return {"celery": celery, "celery_noop": celery_noop}


_BUILDERS = {
    "huey": _huey,
    "huey_noop": _huey,
    "broker": _dramatiq,
    "dramatiq_noop": _dramatiq,
    "celery": _celery,
    "celery_noop": _celery,
}


def __getattr__(name: str) -> Any:
    builder = _BUILDERS.get(name)
    if builder is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        _built.update(builder())
    return _built[name]
