"""What the workers' counters read back as: buckets of counts, histograms and depth.

``Counters.read`` (``core/counters.py``) returns a ``Series``: one ``Stat`` per bucket
(counts by outcome, run and wait time histograms over ``EDGES``) and one ``Depth`` or
``None`` per bucket; ``percentile`` reads a quantile back from a histogram.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import astuple, dataclass, field

__all__ = [
    "CODE_OUTCOMES",
    "DEPTH_FIELDS",
    "EDGES",
    "OUTCOMES",
    "OUTCOME_CODES",
    "WINDOWS",
    "Depth",
    "LastError",
    "Series",
    "Stat",
    "bucket_of",
    "percentile",
    "rounded",
]

#: Upper edges (seconds) of the wait and run time histogram buckets; one more bucket
#: holds what is longer than the last edge. The Prometheus histogram uses the same.
EDGES: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
    1800,
)
#: Outcomes counted, as the Prometheus ``ledger_tasks`` counter's ``outcome`` label
#: names them (``completed`` is what the docs call done), plus ``dead``.
OUTCOMES = ("completed", "failed", "retry", "lost", "dead")
OUTCOME_CODES = {"completed": "d", "failed": "f", "retry": "r", "lost": "l", "dead": "x"}
CODE_OUTCOMES = {code: name for name, code in OUTCOME_CODES.items()}
#: window -> (resolution, buckets, seconds per bucket).
WINDOWS = {"hour": ("m", 60, 60), "day": ("h", 24, 3600), "week": ("h", 168, 3600)}
#: The depth sample's hash fields, in ``Depth``'s order (``counters.lua`` writes them).
DEPTH_FIELDS = ("pending", "due", "claimed", "dead")


@dataclass(frozen=True)
class LastError:
    """The last error a worker saw for a task: its class, its first line, when (ms)."""

    error_class: str
    line: str
    at_ms: int


@dataclass(frozen=True)
class Depth:
    """A queue's depth: PENDING records (``pending``), of them due now, CLAIMED, DEAD.

    ``pending`` is what the Prometheus gauge ``ledger_queue_depth`` reports; in a
    bucket, each is the most any sample in it saw.
    """

    pending: int
    due: int
    claimed: int
    dead: int

    def plus(self, other: Depth) -> Depth:
        return Depth(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


def bucket_of(seconds: float) -> int:
    """The histogram bucket of a duration: the first whose edge is at least it."""
    if seconds != seconds:  # NaN: past every edge, as no comparison holds
        return len(EDGES)
    return bisect_left(EDGES, seconds)


def percentile(histogram: list[int], fraction: float) -> float | None:
    """The ``fraction`` quantile read back from a histogram (``None`` when empty).

    Linear within the bucket that holds it, as Prometheus's ``histogram_quantile``; a
    quantile in the last, open bucket reads as the last edge.
    """
    total = sum(histogram)
    if total == 0:
        return None
    rank = fraction * total
    seen = 0
    for index, count in enumerate(histogram):
        if count and seen + count >= rank:
            if index >= len(EDGES):
                return float(EDGES[-1])
            lower = 0.0 if index == 0 else float(EDGES[index - 1])
            return lower + (EDGES[index] - lower) * max(0.0, rank - seen) / count
        seen += count
    return float(EDGES[-1])  # pragma: no cover - rank <= total always lands above


@dataclass
class Stat:
    """Counts by outcome and the two histograms of one task, one bucket, or a window."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    run: list[int] = field(default_factory=lambda: [0] * (len(EDGES) + 1))
    wait: list[int] = field(default_factory=lambda: [0] * (len(EDGES) + 1))

    def add(self, metric: str, value: int) -> None:
        if metric[0] == "t":
            self.run[int(metric[1:])] += value
        elif metric[0] == "w":
            self.wait[int(metric[1:])] += value
        else:
            self.counts[CODE_OUTCOMES[metric]] += value

    @classmethod
    def summed(cls, stats: Iterable[Stat]) -> Stat:
        whole = cls()
        for stat in stats:
            whole.merge(stat)
        return whole

    def merge(self, other: Stat) -> None:
        for name, value in other.counts.items():
            self.counts[name] += value
        for mine, theirs in ((self.run, other.run), (self.wait, other.wait)):
            for index, value in enumerate(theirs):
                mine[index] += value

    @property
    def runs(self) -> int:
        """Attempts that ended, whatever their outcome."""
        return sum(self.counts.values())

    @property
    def failure_rate(self) -> float | None:
        ended = self.counts["completed"] + self.counts["failed"] + self.counts["dead"]
        return None if not ended else (self.counts["failed"] + self.counts["dead"]) / ended

    def quantiles(self) -> dict[str, float | None]:
        """p50, p95 and p99 of run and wait time, in seconds."""
        return {
            f"{kind}_p{p}": percentile(histogram, p / 100)
            for kind, histogram in (("run", self.run), ("wait", self.wait))
            for p in (50, 95, 99)
        }


@dataclass
class Series:
    """A window of one queue's counters: buckets oldest first, and each task's totals."""

    queue: str
    window: str
    bucket_seconds: int
    now_ms: int
    #: The start of each bucket, epoch ms.
    starts: list[int]
    #: The queue's counts in each bucket (every task added up).
    buckets: list[Stat]
    #: Each task's counts in each bucket.
    task_buckets: dict[str, list[Stat]]
    #: Each task's last error, whenever it was (``errors_since`` keeps the window's).
    errors: dict[str, LastError] = field(default_factory=dict)
    #: The queue's depth in each bucket (the most a sample saw), ``None`` unsampled.
    depth: list[Depth | None] = field(default_factory=list)

    def errors_since(self) -> dict[str, LastError]:
        """The last error of each task that had one within the window."""
        start = self.starts[0] if self.starts else 0
        return {name: e for name, e in self.errors.items() if e.at_ms >= start}

    @property
    def total(self) -> Stat:
        return Stat.summed(self.buckets)

    def tasks(self) -> dict[str, Stat]:
        """Each task's totals over the window, by name."""
        return {name: Stat.summed(stats) for name, stats in sorted(self.task_buckets.items())}


def rounded(value: float | None, digits: int = 4) -> float | None:
    """A quantile for JSON: ``None`` stays, others keep ``digits`` significant places."""
    if value is None:
        return None
    return float(f"{value:.{digits}g}") if math.isfinite(value) else None
