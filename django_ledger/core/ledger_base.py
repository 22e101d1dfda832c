"""What a ``Ledger``'s operations read: its settings, its keys and the runner's plumbing.

``Ledger`` (``ledger.py``) is the one public class; its operations are functions in
modules named for what they do (``admission.py``, ``claiming.py``, ``reading.py``,
``repairing.py``, ``operating.py``), each taking the ledger as a ``LedgerBase``: the
attributes ``Ledger.__init__`` sets, and the keys and plumbing built on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import FusedPathOnly
from .records import State, id_problem
from .runner import Runner
from .scripts import Scripts
from .transport import Translate

__all__ = ["LedgerBase"]


class LedgerBase:
    """The attributes and plumbing a ledger's parts share (``Ledger.__init__`` sets them)."""

    namespace: str
    queue: str
    redis: Any
    runner: Runner
    optimized: bool
    max_payload_bytes: int
    max_records: int
    max_attempts: int
    max_retained: int
    retention_ms: int
    durability_replicas: int
    durability_timeout_ms: int
    #: The queue's KEY (docs/limits.md): each admitted request's key is computed from its
    #: payload and stored with it. Set by ``set_limits`` (``get_ledger`` from the settings).
    limit_key: str | None = None

    # -- keys ---------------------------------------------------------------------

    @property
    def records_key(self) -> str:
        return self.runner.keys.records

    @property
    def ready_key(self) -> str:
        return self.runner.keys.ready

    @property
    def leases_key(self) -> str:
        return self.runner.keys.leases

    @property
    def gate_key(self) -> str:
        return self.runner.keys.gate

    @property
    def quarantine_key(self) -> str:
        return self.runner.keys.quarantine

    @property
    def fences_key(self) -> str:
        """The queue-wide fence counter: every claim's fence comes from it."""
        return self.runner.keys.fences

    @property
    def results_key(self) -> str:
        """Results stored with settlements (``settle(..., result=)``), by request id."""
        return self.runner.keys.results

    @property
    def terminal_keys(self) -> dict[State, str]:
        """The indexes of terminal records, scored by when they ended."""
        return self.runner.terminal_keys

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key of this queue, in the order the scripts take them."""
        return self.runner.keys

    def fused_only(self, feature: str) -> None:
        """Refuse ``feature`` (a job-system extra) on the reference path: ``FusedPathOnly``."""
        if not self.optimized:
            raise FusedPathOnly(feature)

    # -- plumbing (the runner's, here for operator code and tests) -----------------

    @property
    def scripts(self) -> Scripts:
        return self.runner.scripts

    @property
    def clock_skew_ms(self) -> int:
        """Test seam: milliseconds added to the Redis server clock inside every script."""
        return self.runner.clock_skew_ms

    @clock_skew_ms.setter
    def clock_skew_ms(self, value: int) -> None:
        self.runner.clock_skew_ms = value

    def run(self, script: Any, args: Sequence[Any]) -> Any:
        """Run one of this queue's scripts, with errors in the ledger's terms."""
        return self.runner.run(script, args)

    def translate_errors(self) -> Translate:
        return self.runner.translate_errors()

    def server_time_ms(self) -> int:
        """Return the Redis server's clock (plus the test skew) in epoch milliseconds."""
        return self.runner.server_time_ms()

    def _read_fields(self, key: str, ids: list[str]) -> list[bytes | None]:
        """Read the fields ``ids`` of the hash ``key`` (ids checked first), 1,000 a call."""
        for request_id in ids:
            problem = id_problem(request_id)
            if problem is not None:
                raise ValueError(f"request id {request_id!r} is not usable ({problem})")
        found: list[bytes | None] = []
        with self.translate_errors():
            for start in range(0, len(ids), 1000):
                found += self.redis.hmget(key, ids[start : start + 1000])
        return found
