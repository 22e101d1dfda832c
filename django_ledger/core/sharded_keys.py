"""What a sharded queue does not have as a whole: each shard's own keys, scripts and runner."""

from __future__ import annotations

from .errors import LedgerError

__all__ = ["PER_SHARD", "PerShard"]

#: The members of a one-shard ``Ledger`` that belong to its shard: on a ``ShardedLedger``
#: asking for one is a mistake, answered with ``PerShard``.
PER_SHARD = frozenset(
    {
        "runner",
        "records_key",
        "ready_key",
        "leases_key",
        "gate_key",
        "quarantine_key",
        "fences_key",
        "results_key",
        "terminal_keys",
        "keys",
        "scripts",
        "run",
        "scan_page",
        "repair_records",
    }
)


class PerShard(LedgerError, AttributeError):
    """A sharded queue was asked for what only one of its shards has.

    An ``AttributeError`` too: the sharded ledger has no such member, so ``getattr`` with
    a default and ``hasattr`` answer as for any missing attribute.
    """

    def __init__(self, ledger: str, shards: int, what: str) -> None:
        super().__init__(
            f"{ledger} has {shards} shards, each with its own {what}: use "
            f"ledger.shards[i].{what}, or ledger.shard_for(request_id).{what}"
        )
        self.what = what
