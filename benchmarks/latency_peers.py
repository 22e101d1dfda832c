"""Celery for ``benchmarks/latency_bench.py``: a no-op task with results kept in Redis.

Built on first access (PEP 562), so the bench imports it without Celery installed.
``REDIS_URL`` names the bench's private redis-server (broker and result backend).
The worker: ``celery -A benchmarks.latency_peers:celery worker`` with its defaults
(prefork, one process per CPU).
"""

from __future__ import annotations

import os
from typing import Any

_built: dict[str, Any] = {}


def _celery() -> dict[str, Any]:
    from celery import Celery

    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:1/0")
    celery = Celery("latency", broker=url, backend=url)

    @celery.task(name="latency.noop")
    def celery_noop() -> None:
        """Nothing."""

    return {"celery": celery, "celery_noop": celery_noop}


def __getattr__(name: str) -> Any:
    if name not in ("celery", "celery_noop"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        _built.update(_celery())
    return _built[name]
