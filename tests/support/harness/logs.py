"""Read back what the agents logged outside Redis."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AgentLogs", "read_logs"]


@dataclass
class AgentLogs:
    """Everything the agents of one run wrote, by identity."""

    #: Ids a producer saw acknowledged.
    acknowledged: set[str] = field(default_factory=set)
    #: Ids a producer never saw acknowledged, with the last answer it had.
    unacknowledged: dict[str, str] = field(default_factory=dict)
    #: (kind ``D`` or ``C``, id, status, reason) of every duplicate and conflict sent.
    probes: list[tuple[str, str, str, str]] = field(default_factory=list)
    producers_finished: int = 0
    #: id -> [(fence, owner)] of every claim granted.
    grants: dict[str, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    #: id -> {(fence, state)} of every settlement asked for.
    intents: dict[str, set[tuple[int, str]]] = field(default_factory=lambda: defaultdict(set))
    #: id -> [(fence, state, owner, updated_at)] of every settlement accepted.
    accepted: dict[str, list[tuple[int, str, str, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    lost_answers: Counter[str] = field(default_factory=Counter)
    unavailable: Counter[str] = field(default_factory=Counter)
    repair: Counter[str] = field(default_factory=Counter)
    #: Settlements answered SETTLED again because an earlier try had landed.
    replays: int = 0
    #: Settlements accepted from the worker whose clock is off.
    skewed_settlements: int = 0
    #: Log names of worker incarnations that ended holding claims they never settled.
    ended_holding: set[str] = field(default_factory=set)
    unreadable_lines: int = 0


def read_logs(folder: Path) -> AgentLogs:
    logs = AgentLogs()
    for path in sorted(folder.glob("*.log")):
        role = path.name.split("-", 1)[0]
        reader = {"producer": _producer, "worker": _worker, "repairer": _repairer}[role]
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            reader(logs, path.stem, handle.read().splitlines())
    return logs


def _producer(logs: AgentLogs, name: str, lines: list[str]) -> None:
    for line in lines:
        parts = line.split("\t")
        kind = parts[0]
        if kind == "A" and len(parts) == 2:
            logs.acknowledged.add(parts[1])
        elif kind == "U" and len(parts) == 4:
            logs.unacknowledged[parts[1]] = f"{parts[2]} {parts[3]}"
        elif kind in ("D", "C") and len(parts) == 4:
            logs.probes.append((kind, parts[1], parts[2], parts[3]))
        elif kind == "E":
            logs.unavailable["producer"] += 1
        elif kind == "Z":
            logs.producers_finished += 1
        else:
            logs.unreadable_lines += 1


def _worker(logs: AgentLogs, name: str, lines: list[str]) -> None:
    skewed = name.startswith("worker-0-")
    holding: set[str] = set()
    for line in lines:
        parts = line.split("\t")
        kind = parts[0]
        try:
            if kind == "G" and len(parts) == 4:
                logs.grants[parts[1]].append((int(parts[2]), parts[3]))
                holding.add(parts[1])
            elif kind == "I" and len(parts) == 5:
                logs.intents[parts[1]].add((int(parts[2]), parts[3]))
                holding.discard(parts[1])
            elif kind == "S" and len(parts) == 7:
                logs.accepted[parts[1]].append((int(parts[2]), parts[3], parts[4], int(parts[5])))
                logs.skewed_settlements += skewed
                logs.replays += int(parts[6])
            elif kind == "L" and len(parts) == 4:
                logs.lost_answers[parts[3].split(":")[-1]] += 1
                holding.discard(parts[1])
            elif kind == "E":
                logs.unavailable["worker"] += 1
            else:
                logs.unreadable_lines += 1
        except ValueError:
            logs.unreadable_lines += 1
    if holding:
        logs.ended_holding.add(name)


def _repairer(logs: AgentLogs, name: str, lines: list[str]) -> None:
    for line in lines:
        parts = line.split("\t")
        if parts[0] == "R":
            logs.repair["cycles"] += 1
            for pair in parts[1:]:
                key, _, value = pair.partition("=")
                if key != "scanned":
                    logs.repair[key] += int(value)
        elif parts[0] == "E":
            logs.unavailable["repairer"] += 1
        else:
            logs.unreadable_lines += 1
