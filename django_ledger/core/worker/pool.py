"""The worker's job threads: a fixed set, each taking the next item from one queue.

Lighter than ``concurrent.futures.ThreadPoolExecutor`` for the runtime's use: no
``Future`` per job (a condition and a lock each), no semaphore to count idle threads.
The runtime needs neither: an outcome reaches its main loop through its own outbox,
and a claim that never started is given back by the runtime's own bookkeeping, not by
cancelling a future.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["JobThreads"]

log = logging.getLogger("django_ledger.worker")

_T = TypeVar("_T")


class JobThreads(Generic[_T]):
    """``size`` daemon threads calling ``work(item)`` for each item submitted, in order."""

    def __init__(self, size: int, work: Callable[[_T], None], name: str) -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least one thread, got {size}")
        self._work = work
        self._items: queue.SimpleQueue[_T | None] = queue.SimpleQueue()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}_{i}", daemon=True)
            for i in range(size)
        ]
        self._started = False
        self._lock = threading.Lock()

    def submit(self, item: _T) -> None:
        """Run ``work(item)`` on the next free thread (threads start on the first item)."""
        if not self._started:
            self._start()
        self._items.put(item)

    def shutdown(self, wait: bool) -> None:
        """Run nothing more; with ``wait``, join the threads (after the items they run)."""
        self._closed = True
        with self._lock:
            started = self._started
            self._started = True  # a late submit starts nothing
        if not started:
            return
        for _ in self._threads:
            self._items.put(None)
        if wait:
            for thread in self._threads:
                thread.join()

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
            for thread in self._threads:
                thread.start()

    def _serve(self) -> None:
        items, work = self._items, self._work
        while True:
            item = items.get()
            if item is None or self._closed:
                return
            try:
                work(item)
            except BaseException:  # a thread that died would leave the pool one short
                log.exception("%s: an item escaped its work", threading.current_thread().name)
