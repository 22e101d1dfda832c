"""What the repairer's thread beats beside repair: a ``Room`` (``upkeep.Repairer``).

Its own module, with no imports, so that ``config.WorkerConfig.rooms`` can name it and
``upkeep`` can beat it without an import cycle.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Room"]


class Room(Protocol):
    """A piece of upkeep beside repair, beaten in the repairer's thread until the worker ends.

    A beat does a bounded piece of work (it holds up repair meanwhile) and returns the
    seconds until the next one: 0 when more is waiting. ``close`` runs in the same
    thread once the worker is done (to close what the beats opened there). The Django
    face's outbox relay is one (``services/relay.py``).
    """

    name: str

    def beat(self) -> float: ...
    def close(self) -> None: ...
