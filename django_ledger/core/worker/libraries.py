"""Other versions' function libraries, dropped by each worker at start and once a day.

A deploy of a new version loads a new library (``ledger_<hash>``) beside the old one,
so two versions run side by side while it rolls out; nothing else removes the old one,
which would stay in each server's memory (about 0.5 MB a version). A ``Room`` beaten in
the repairer's thread drops them: at the worker's start, then every ``PERIOD``. A
process of the old version still running loads its library again at its next call
(``scripts.fcall``), so a drop never refuses a call; during a rolling deploy each new
worker's start costs the old processes at most one load each.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import redis as redis_py

from ..scripts import drop_old_libraries

__all__ = ["OldLibraries"]

log = logging.getLogger("django_ledger.worker")

#: Seconds between two drops after the first.
PERIOD = 24 * 3600.0
#: Seconds before the next try when a server could not be reached.
RETRY = 60.0


class OldLibraries:
    """A ``Room``: drop other versions' libraries from ``clients``' servers (see the module)."""

    name = "old libraries"

    def __init__(self, clients: Iterable[Any]) -> None:
        self._clients = list({id(client): client for client in clients}.values())
        self._refused: set[int] = set()  # clients whose user may not delete functions

    def beat(self) -> float:
        wait = PERIOD
        for client in self._clients:
            if id(client) in self._refused:
                continue
            try:
                dropped = drop_old_libraries(client)
            except (redis_py.ConnectionError, redis_py.TimeoutError) as exc:
                log.info("old libraries: not dropped now (%s); trying again", exc)
                wait = RETRY
                continue
            except redis_py.ResponseError as exc:  # NOPERM: the app's user may not
                log.info("old libraries: left in place (%s)", exc)
                self._refused.add(id(client))
                continue
            if dropped:
                log.info("old libraries: dropped %s", ", ".join(dropped))
        return wait

    def close(self) -> None:
        """Nothing to close: the clients are the ledgers'."""
