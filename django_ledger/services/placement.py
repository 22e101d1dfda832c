"""Where each configured queue lives: its cluster slot, the master serving it, its counters.

On a Redis Cluster every key of a queue carries the hash tag ``{namespace:queue}``, so a
queue lives in one slot (CRC16 of the tag, modulo 16384) and on the one master that
serves it. Two busy queues whose tags land on the same master share its CPU; this is
what ``manage.py ledger_status`` shows and warns about.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..conf import get_ledger
from ..core.errors import LedgerError
from ..core.results import Stats
from .repair import configured_queues

__all__ = ["Placement", "crowded_masters", "place_queues"]


@dataclass(frozen=True)
class Placement:
    """One queue's place: slot (``None`` off a cluster), its node, and its counters."""

    queue: str
    slot: int | None
    node: str
    stats: Stats | None = None
    error: str | None = None

    @property
    def live(self) -> int:
        """Records a worker may still hold or get: PENDING and CLAIMED."""
        return 0 if self.stats is None else self.stats.pending + self.stats.claimed


def place_queues(requested: Iterable[str] = ()) -> list[Placement]:
    """Place the requested queues (every configured one if none); a failing one says why."""
    placed = []
    for name in configured_queues(requested):
        ledger = get_ledger(name)
        try:
            slot, node = ledger.runner.placement()
        except LedgerError as exc:
            placed.append(Placement(name, None, "?", error=str(exc)))
            continue
        try:
            placed.append(Placement(name, slot, node, ledger.stats()))
        except LedgerError as exc:
            placed.append(Placement(name, slot, node, error=str(exc)))
    return placed


def crowded_masters(placed: Iterable[Placement], busy: int = 1) -> dict[str, list[Placement]]:
    """Return cluster master -> its queues, for each master serving two or more busy ones.

    A queue is busy with at least ``busy`` live records (PENDING or CLAIMED). Off a
    cluster every queue shares the one server by design: nothing is returned.
    """
    by_node: dict[str, list[Placement]] = {}
    for placement in placed:
        if placement.slot is not None and placement.live >= busy:
            by_node.setdefault(placement.node, []).append(placement)
    return {node: queues for node, queues in by_node.items() if len(queues) > 1}
