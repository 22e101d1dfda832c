"""The one table a conservation run prints."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tests.support.harness.checker import Findings
from tests.support.harness.config import Config
from tests.support.harness.logs import AgentLogs

__all__ = ["Outcome", "render"]

_FAULT_LABELS = {
    "worker_kill": "worker SIGKILL mid-lease (restarted)",
    "worker_pause": "worker SIGSTOP past its leases",
    "redis_kill": "Redis SIGKILL (restarted from AOF)",
    "proxy_drop": "proxy: connections dropped",
    "proxy_stall": "proxy: stalled past the timeout",
    "proxy_half_close": "proxy: half-closed (replies lost)",
    "function_flush": "FUNCTION FLUSH",
    "garbage": "records overwritten with garbage",
}


@dataclass
class Outcome:
    """A finished run: its settings, what was injected, what the check found, timings."""

    config: Config
    faults: Counter[str]
    garbage: set[str]
    logs: AgentLogs
    findings: Findings
    #: Seconds from the first admission until nothing was pending or claimed.
    drain_seconds: float
    #: Seconds from the last fault until nothing was pending or claimed.
    drain_after_faults: float
    drained: bool
    crashes: list[str] = field(default_factory=list)
    mid_lease_kills: int = 0

    @property
    def lost(self) -> int:
        return len(self.findings.lost)

    @property
    def duplicated(self) -> int:
        return len(self.findings.duplicated)

    @property
    def wrong(self) -> int:
        return len(self.findings.wrong) + len(self.crashes)

    @property
    def passed(self) -> bool:
        """Zero lost, zero duplicated, zero wrong, and the queue drained."""
        return self.lost == 0 and self.duplicated == 0 and self.wrong == 0 and self.drained

    @property
    def table(self) -> str:
        return render(self)


def render(outcome: Outcome) -> str:
    config, found, logs = outcome.config, outcome.findings, outcome.logs
    rows: list[tuple[str, str]] = [
        ("identities (acknowledged)", f"{found.identities:,} of {found.attempted:,}"),
        ("producers / workers", f"{config.producers} / {config.workers}"),
        ("faults injected", f"{sum(outcome.faults[k] for k in _FAULT_LABELS):,}"),
    ]
    for kind, label in _FAULT_LABELS.items():
        count = outcome.faults[kind]
        if kind == "worker_kill":
            value = f"{count} ({outcome.mid_lease_kills} holding claims)"
        elif kind == "worker_pause":
            value = f"{count} ({outcome.faults['worker_pause_holding']} holding claims)"
        elif kind == "garbage":
            value = f"{count} ({len(outcome.garbage)} records)"
        else:
            value = str(count)
        rows.append((f"  {label}", value))
    rows += [
        (
            "  worker clock off by",
            f"{config.clock_skew_hours:+g} h ({logs.skewed_settlements:,} settlements accepted)",
        ),
        (
            "LedgerUnavailable seen",
            ", ".join(f"{k} {v:,}" for k, v in sorted(logs.unavailable.items())) or "0",
        ),
        ("claims granted", f"{found.grants:,}"),
        ("settlements accepted", f"{found.accepted:,} ({logs.replays:,} answered as replays)"),
        (
            "settlements LOST",
            ", ".join(f"{k} {v:,}" for k, v in sorted(logs.lost_answers.items())) or "0",
        ),
        ("repair cycles", _repair(logs.repair)),
        ("final states", ", ".join(f"{k} {v:,}" for k, v in sorted(found.final_states.items()))),
        ("lost", f"{outcome.lost:,}"),
        ("duplicated terminal settlements", f"{outcome.duplicated:,}"),
        ("wrong states", f"{outcome.wrong:,}"),
        ("quarantined", f"{found.quarantined:,} (garbage: {len(outcome.garbage):,})"),
        (
            "time to drain",
            f"{outcome.drain_seconds:.1f} s ({outcome.drain_after_faults:.1f} s after the last fault)"
            + ("" if outcome.drained else " NOT DRAINED"),
        ),
        ("verdict", "PASS" if outcome.passed else "FAIL"),
    ]
    width = max(len(label) for label, _ in rows)
    vwidth = max(len(value) for _, value in rows)
    rule = f"+-{'-' * width}-+-{'-' * vwidth}-+"
    lines = [rule] + [f"| {label:<{width}} | {value:>{vwidth}} |" for label, value in rows] + [rule]
    shown = outcome.crashes + found.problems
    if shown:
        lines.append(f"{len(shown)} problem(s), the first 20:")
        lines += [f"  {line}" for line in shown[:20]]
    return "\n".join(lines)


def _repair(counts: Counter[str]) -> str:
    names = ("expired", "dead", "reindexed", "quarantined", "purged", "stale")
    done = ", ".join(f"{name} {counts[name]:,}" for name in names if counts[name])
    return f"{counts['cycles']:,}" + (f" ({done})" if done else "")
