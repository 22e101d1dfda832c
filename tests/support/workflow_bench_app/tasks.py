"""The tasks of ``benchmarks/workflow_bench.py``: a no-op chord step and its callback.

On the queue ``wfbench`` of ``tests.support.workflow_bench_settings``; the same work as Celery's
in ``benchmarks/workflow_peers.py``.
"""

from __future__ import annotations

from django_ledger.tasks.compat import task


@task(queue_name="wfbench")
def step(index: int) -> int:
    """Nothing but its index back (the callback checks the order)."""
    return index


@task(queue_name="wfbench")
def collect(results: list[int]) -> list[int]:
    """The chord's callback: how many results, and whether they came in order."""
    return [len(results), int(results == list(range(len(results))))]
