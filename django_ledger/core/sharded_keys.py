"""The keys and scripts of a sharded queue: each belongs to one shard, never to the whole."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import LedgerError
from .ledger_base import LedgerBase
from .records import State
from .runner import Runner
from .scripts import Scripts

__all__ = ["PerShardKeys"]


class PerShardKeys(LedgerBase):
    """Refuse, on a whole sharded queue, what only one of its shards has."""

    shard_count: int

    def _unsharded(self, what: str) -> LedgerError:
        return LedgerError(
            f"{self!r} has {self.shard_count} shards, each with its own {what}: use "
            f"ledger.shards[i].{what}, or ledger.shard_for(request_id).{what}"
        )

    # Keys and scripts belong to one shard: on the whole queue they are a mistake.
    @property
    def runner(self) -> Runner:  # type: ignore[override]
        raise self._unsharded("runner")

    @property
    def records_key(self) -> str:
        raise self._unsharded("records_key")

    @property
    def ready_key(self) -> str:
        raise self._unsharded("ready_key")

    @property
    def leases_key(self) -> str:
        raise self._unsharded("leases_key")

    @property
    def gate_key(self) -> str:
        raise self._unsharded("gate_key")

    @property
    def quarantine_key(self) -> str:
        raise self._unsharded("quarantine_key")

    @property
    def fences_key(self) -> str:
        raise self._unsharded("fences_key")

    @property
    def results_key(self) -> str:
        raise self._unsharded("results_key")

    @property
    def terminal_keys(self) -> dict[State, str]:
        raise self._unsharded("terminal_keys")

    @property
    def keys(self) -> tuple[str, ...]:
        raise self._unsharded("keys")

    @property
    def scripts(self) -> Scripts:
        raise self._unsharded("scripts")

    def run(self, script: Any, args: Sequence[Any]) -> Any:
        raise self._unsharded("run")
