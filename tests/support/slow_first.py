"""Start the suite's slowest tests first (their list: ``tests/support/slow_tests.txt``).

Under pytest-xdist a long process test scheduled last keeps one worker busy while the
others have finished. The known slow tests go to the front, longest first, and the rest
keep pytest's order; ``--maxschedchunk`` (tox.ini) hands tests out a few at a time, so the
slow ones spread over the workers instead of queueing behind each other. Only the order
changes: every test still runs. ``scripts/slow_tests.py`` rewrites the list from a run.
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


@pytest.hookimpl(trylast=True)  # after the cluster halves' selection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    seconds = known_seconds()
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (-seconds.get(item.nodeid, 0.0), order[id(item)]))
