"""Celery's half of ``benchmarks/workflow_bench.py``: a no-op step and a chord callback.

In the benchmark's scratch virtualenv only (celery is not a dependency of the project).
``BENCH_REDIS_URL`` names the bench's private redis-server, used as Celery's broker and
as its result backend (a chord needs one). Everything else is Celery's default: the
Redis backend's native chords (each header task, once stored, counts itself in the
chord's counter and the last one applies the callback), acknowledgement on receipt,
prefetch multiplier 4. The worker: ``celery -A benchmarks.workflow_peers:celery worker
--pool threads``.

The app is built on first access (PEP 562 ``__getattr__``), so that importing this
module costs nothing.
"""

from __future__ import annotations

import os
from typing import Any

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:1/0")

_built: dict[str, Any] = {}


def _celery() -> dict[str, Any]:
    from celery import Celery

    celery = Celery("wfbench", broker=URL, backend=URL)

    @celery.task(name="wfbench.step")
    def step(index: int) -> int:
        """Nothing but its index back (the callback checks the order)."""
        return index

    @celery.task(name="wfbench.collect")
    def collect(results: list[int]) -> list[int]:
        """The chord's callback: how many results, and whether they came in order."""
        return [len(results), int(results == list(range(len(results))))]

    return {"celery": celery, "step": step, "collect": collect}


def __getattr__(name: str) -> Any:
    if name not in ("celery", "step", "collect"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        _built.update(_celery())
    return _built[name]
