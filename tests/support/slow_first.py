"""Run the suite's slowest tests early (their list: ``tests/support/slow_tests.txt``).

Under pytest-xdist a long process test scheduled last keeps one worker busy while the
others have finished. The known slow tests, longest first, are spread over the first half
of the run, between the others (which keep pytest's order): none is left for the end, and
no more of them run at once than before, so the processes they start do not all compete
for the CPUs together. ``--maxschedchunk`` (pyproject.toml) hands tests out two at a time,
so the order holds across the workers. Only the order changes: every test still runs.
``scripts/slow_tests.py`` rewrites the list from a run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

LIST = Path(__file__).with_name("slow_tests.txt")


def known_seconds() -> dict[str, float]:
    seconds: dict[str, float] = {}
    for line in LIST.read_text().splitlines():
        if line and not line.startswith("#"):
            value, node = line.split(" ", 1)
            seconds[node] = float(value)
    return seconds


def spread(slow: list[pytest.Item], rest: list[pytest.Item]) -> list[pytest.Item]:
    """``slow`` in its order, one every so many of ``rest``, over the first half of ``rest``."""
    if not slow:
        return rest
    step = max(len(rest) // 2, 1) / len(slow)
    order: list[pytest.Item] = []
    taken = 0
    for n, item in enumerate(rest):
        while taken < len(slow) and taken * step <= n:
            order.append(slow[taken])
            taken += 1
        order.append(item)
    return order + slow[taken:]


@pytest.hookimpl(trylast=True)  # after the cluster halves' selection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    seconds = known_seconds()
    slow = sorted((i for i in items if i.nodeid in seconds), key=lambda i: -seconds[i.nodeid])
    rest = [item for item in items if item.nodeid not in seconds]
    items[:] = spread(slow, rest)
