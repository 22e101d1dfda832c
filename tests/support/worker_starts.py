"""A test's worker processes: started as it asks, each logging to its own file, stopped after.

A fixture yields from ``starting`` with how to make one process from its arguments and
its log file (``WorkerProcess``, or a variant with settings of its own)::

    @pytest.fixture
    def start(redis_server, namespace, tmp_path):
        yield from starting(tmp_path, lambda args, log: WorkerProcess(url, namespace, args, log))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar


class Stoppable(Protocol):
    def stop(self) -> Any: ...


Process = TypeVar("Process", bound=Stoppable)


def starting(
    tmp_path: Path, make: Callable[..., Process], suffix: str = ".log"
) -> Iterator[Callable[..., Process]]:
    """Yield ``start(*args, **options)``: ``make(list(args), log, **options)``, remembered;
    once the test is done, stop every process it started."""
    started: list[Process] = []

    def start(*args: str, **options: Any) -> Process:
        process = make(list(args), tmp_path / f"worker-{len(started)}{suffix}", **options)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
