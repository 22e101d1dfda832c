"""What one conservation run does, and the identities it works on.

The same ``Config`` drives the short CI run (``tests/core/test_conservation.py``) and the
long run by hand (``benchmarks/conservation.py``). It travels to every agent process
as JSON, so it holds plain values only.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

__all__ = ["FAULT_KINDS", "Config", "payload_of", "request_id"]

#: Every fault the injector knows, in the order the table lists them.
FAULT_KINDS = (
    "worker_kill",
    "worker_pause",
    "redis_kill",
    "proxy_drop",
    "proxy_stall",
    "proxy_half_close",
    "function_flush",
    "garbage",
)


def request_id(number: int) -> str:
    """Return the id of identity ``number``."""
    return f"id-{number:08d}"


def number_of(request_id: str) -> int:
    return int(request_id[3:])


def payload_of(number: int) -> str:
    """Return the one payload identity ``number`` is admitted with (never ASCII only)."""
    return f"job {number} \u2713 caf\u00e9 {'x' * (number % 37)}"


def conflicting_payload_of(number: int) -> str:
    return f"another job {number}"


@dataclass
class Config:
    """One run: the load, the faults and the ledger's settings."""

    identities: int = 10_000
    workers: int = 4
    producers: int = 2
    #: Seconds during which faults are injected; admission is paced over most of it.
    duration: float = 24.0
    #: Seconds over which producers spread their admissions (default: 70 % of duration).
    admit_seconds: float | None = None
    seed: int = 20_240_601
    #: The least number of faults of each kind; the schedule adds more at random.
    min_faults: dict[str, int] = field(
        default_factory=lambda: {
            "worker_kill": 3,
            "worker_pause": 2,
            "redis_kill": 2,
            "proxy_drop": 2,
            "proxy_stall": 2,
            "proxy_half_close": 2,
            "function_flush": 2,
            "garbage": 2,
        }
    )
    #: Mean seconds between two faults (more faults than the minimum on long runs).
    fault_interval: float = 1.5
    garbage_per_fault: int = 3
    #: Hours the clock of worker 0 is off (its ``time.time`` is patched).
    clock_skew_hours: float = 3.0
    # The load.
    admit_batch: int = 100
    claim_batch: int = 32
    lease_seconds: float = 2.0
    #: Share of claims renewed once before they settle.
    renew_rate: float = 0.2
    #: Shares of settlements: COMPLETED, FAILED; the rest go back PENDING with a delay.
    completed_rate: float = 0.6
    failed_rate: float = 0.15
    retry_delay_max: float = 0.3
    #: Upper bound of the simulated work per claimed batch, in seconds.
    work_seconds: float = 0.04
    #: Shares of an admission batch added as duplicates, conflicts, and ids that
    #: another producer admits too.
    duplicate_rate: float = 0.05
    conflict_rate: float = 0.01
    overlap_rate: float = 0.02
    # The ledger.
    namespace: str = "conservation"
    queue: str = "q"
    max_attempts: int = 16
    retention_days: float = 30.0
    repair_page: int = 500
    repair_pause: float = 0.3
    # The client.
    socket_timeout: float = 1.0
    #: Seconds to wait for the queue to drain after the last fault.
    drain_timeout: float = 120.0
    #: Directory for logs (the harness makes a temporary one when empty).
    workdir: str = ""
    #: Filled in by the harness: the URL clients use (the proxy's).
    url: str = ""

    @property
    def admission_seconds(self) -> float:
        return self.admit_seconds if self.admit_seconds is not None else self.duration * 0.7

    @property
    def max_records(self) -> int:
        return self.identities * 2 + 1000

    def ledger_kwargs(self) -> dict[str, Any]:
        return {
            "max_records": self.max_records,
            "max_attempts": self.max_attempts,
            "retention": timedelta(days=self.retention_days),
        }

    def path(self, *parts: str) -> Path:
        return Path(self.workdir, *parts)

    def save(self) -> Path:
        target = self.path("config.json")
        target.write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> Config:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))

    def ids_of_producer(self, index: int) -> list[int]:
        """Return the identities producer ``index`` admits, in order.

        Each identity has one home producer; a share of them (``overlap_rate``) is
        admitted by the next producer as well, so that two producers race on them.
        """
        home = [n for n in range(index, self.identities, self.producers)]
        if self.producers < 2:
            return home
        previous = (index - 1) % self.producers
        every = max(1, round(1 / self.overlap_rate)) if self.overlap_rate > 0 else 0
        borrowed = (
            [
                n
                for n in range(previous, self.identities, self.producers)
                if (n // self.producers) % every == 0
            ]
            if every
            else []
        )
        merged = sorted(set(home) | set(borrowed))
        return merged
