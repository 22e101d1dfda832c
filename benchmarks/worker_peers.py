"""The peers ``benchmarks/worker_bench.py`` drains beside ``ledger_worker``: one no-op each.

Imported by the peers' own worker commands (and by the bench, to enqueue), in the
benchmark's scratch virtualenv only (``.venv-bench``: huey, dramatiq, rq and celery are
not dependencies of the project). ``BENCH_REDIS_URL`` names the bench's private
redis-server. Every peer runs with its defaults but for the pool it is given on its
command line.
"""

from __future__ import annotations

import os

import dramatiq
from celery import Celery
from dramatiq.brokers.redis import RedisBroker
from huey import RedisHuey

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:1/0")

#: huey: ``huey_consumer benchmarks.worker_peers.huey -w 1 -k thread``.
huey = RedisHuey("bench", url=URL)


@huey.task()
def huey_noop() -> None:
    """Nothing (huey stores no result for ``None``)."""


#: dramatiq: ``dramatiq benchmarks.worker_peers --processes 1 --threads 8``.
broker = RedisBroker(url=URL)
dramatiq.set_broker(broker)


@dramatiq.actor
def dramatiq_noop() -> None:
    """Nothing."""


def rq_noop() -> None:
    """Nothing (RQ: ``rq worker --burst``, enqueued by this function's path)."""


#: celery: ``celery -A benchmarks.worker_peers worker --pool threads --concurrency 8``.
celery = Celery("bench", broker=URL)


@celery.task(name="bench.noop")
def celery_noop() -> None:
    """Nothing (no result backend is configured: Celery's default)."""
