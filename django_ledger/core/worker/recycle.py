"""A worker's recycle: after so many tasks, or past so much memory, it makes way for another.

A recycling worker starts no more tasks (``WorkerState.may_start``), gives back the claims
it holds unstarted (PENDING at once, no attempt spent), lets the running ones finish and
settle, and ``Worker.run`` returns ``EXIT_RECYCLE``: ``ledger_worker --processes`` then
starts a fresh process in its place, always.
"""

from __future__ import annotations

import logging
import os
import resource
import sys

from .state import WorkerState

__all__ = ["Recycle", "resident_mib"]


log = logging.getLogger("django_ledger.worker")

MIB = 1024 * 1024


def resident_mib() -> float:
    """This process's resident memory now, in MiB (its peak where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / MIB
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / MIB if sys.platform == "darwin" else peak / 1024  # bytes / KiB


class Recycle:
    """Whether a worker recycles: its task count (kept by ``state``) or its memory."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state
        self._said = False

    def due(self) -> bool:
        """Check the memory (after a settle round); say so once when the recycle begins."""
        state = self._state
        limit = state.config.max_memory_per_child
        if state.recycle is None and limit is not None:
            used = resident_mib()
            if used > limit:
                with state.lock:
                    if state.recycle is None:
                        state.recycle = f"{used:.0f} MiB resident, above {limit:g}"
        if state.recycle is None:
            return False
        if not self._said:
            self._said = True
            with state.lock:
                running = sum(1 for entry in state.in_hand.values() if entry.started is not None)
            log.info(
                "worker %s recycling (%s): %d task(s) running finish, then a new process",
                state.worker_id,
                state.recycle,
                running,
            )
        return True
