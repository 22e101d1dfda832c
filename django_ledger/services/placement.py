"""Where each configured queue lives: its cluster slot, the master serving it, its counters.

On a Redis Cluster every key of a queue carries the hash tag ``{namespace:queue}``, so a
queue lives in one slot (CRC16 of the tag, modulo 16384) and on the one master that
serves it; a queue of ``SHARDS`` N is N such tags, one placement each. Two busy queues
(or two shards of one) whose tags land on the same master share its CPU; this is what
``manage.py ledger_status`` and the admin's queue page show and warn about.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..conf import get_ledger
from ..core.errors import LedgerError
from ..core.results import Stats
from ..core.sharded import AnyLedger
from .repair import configured_queues

__all__ = ["Placement", "crowded_masters", "place_ledger", "place_queues"]


@dataclass(frozen=True)
class Placement:
    """One queue's (or shard's) place: slot (``None`` off a cluster), node, and counters."""

    queue: str
    slot: int | None
    node: str
    stats: Stats | None = None
    error: str | None = None
    #: The shard's number in a queue of several (``None``: a queue of one shard).
    shard: int | None = None

    @property
    def name(self) -> str:
        """The queue's name, with the shard's number in brackets for a sharded queue."""
        return self.queue if self.shard is None else f"{self.queue}[{self.shard}]"

    @property
    def live(self) -> int:
        """Records a worker may still hold or get: PENDING and CLAIMED."""
        return 0 if self.stats is None else self.stats.pending + self.stats.claimed


def place_queues(requested: Iterable[str] = ()) -> list[Placement]:
    """Place the requested queues (every configured one if none); a failing one says why.

    A sharded queue gives one placement per shard, shard 0 first.
    """
    placed = []
    for name in configured_queues(requested):
        try:
            ledger = get_ledger(name)
        except LedgerError as exc:
            placed.append(Placement(name, None, "?", error=str(exc)))
            continue
        placed += place_ledger(ledger)
    return placed


def place_ledger(ledger: AnyLedger) -> list[Placement]:
    """Place one queue's shards (one for a queue of one shard)."""
    sharded = len(ledger.shards) > 1
    placed = []
    for index, shard in enumerate(ledger.shards):
        number = index if sharded else None
        slot, node = None, "?"
        try:
            slot, node = shard.runner.placement()
            placed.append(Placement(ledger.queue, slot, node, shard.stats(), shard=number))
        except LedgerError as exc:
            placed.append(Placement(ledger.queue, slot, node, error=str(exc), shard=number))
    return placed


def crowded_masters(placed: Iterable[Placement], busy: int = 1) -> dict[str, list[Placement]]:
    """Return cluster master -> its queues, for each master serving two or more busy ones.

    A queue (or a shard) is busy with at least ``busy`` live records (PENDING or
    CLAIMED); two shards of one queue on one master count as two. Off a cluster every
    queue shares the one server by design: nothing is returned.
    """
    by_node: dict[str, list[Placement]] = {}
    for placement in placed:
        if placement.slot is not None and placement.live >= busy:
            by_node.setdefault(placement.node, []).append(placement)
    return {node: queues for node, queues in by_node.items() if len(queues) > 1}


def crowding_hint(node: str, placed: list[Placement]) -> str:
    """The hint for one crowded master: who shares it and what to do about it."""
    names = ", ".join(f"{p.name} (slot {p.slot}, {p.live} live)" for p in placed)
    what = "busy queues"
    if len({p.queue for p in placed}) == 1:
        what = f"busy shards of queue {placed[0].queue}"
    return (
        f"hint: {len(placed)} {what} share the master {node}: {names}. They compete for "
        "its one CPU; move a slot to another master (redis-cli --cluster reshard, or "
        "CLUSTER SETSLOT), or give a new queue a name whose hash tag lands elsewhere "
        "(see 'Placement' in 'Redis Cluster' of the django-ledger docs)."
    )
