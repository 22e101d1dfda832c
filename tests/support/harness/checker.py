"""The conservation check: every identity, against Redis and against the agents' logs.

Run after every agent has stopped. It runs one last repair cycle, reads every key of
the queue, and holds each identity to these rules:

* every acknowledged admission exists: its record is there (else it is *lost*);
* every acknowledged identity ends in exactly one terminal state (COMPLETED, FAILED
  or DEAD), or in quarantine if and only if the injector overwrote it with garbage;
* no identity has accepted terminal settlements from two different claims (fences)
  (else it is *duplicated*); a replay of one settlement (same claim, same fence)
  counts once;
* per identity, accepted settlements of distinct claims come with strictly growing
  fences, no claim is granted twice with one fence, none after a terminal
  settlement, and the stored fence is never below a granted one;
* a terminal state is one a worker asked for (or DEAD, which only the ledger sets);
* each record is in exactly the index its state calls for, with the right score, and
  no index holds an id without a record;
* the counters of ``stats`` agree with the records and add up to the total.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import redis

from django_ledger import CorruptRecord, Ledger, RepairReport, State
from django_ledger.core.records import decode_record
from tests.support.harness.config import Config, number_of, payload_of, request_id
from tests.support.harness.logs import AgentLogs

__all__ = ["Findings", "check"]

_TERMINAL = {"COMPLETED", "FAILED"}
_INDEX_OF = {
    State.PENDING: "ready",
    State.CLAIMED: "leases",
    State.COMPLETED: "completed",
    State.FAILED: "failed",
    State.DEAD: "dead",
}


@dataclass
class Findings:
    """What the check found; ``problems`` holds one readable line per violation."""

    identities: int = 0
    attempted: int = 0
    lost: set[str] = field(default_factory=set)
    duplicated: set[str] = field(default_factory=set)
    wrong: set[str] = field(default_factory=set)
    quarantined: int = 0
    final_states: Counter[str] = field(default_factory=Counter)
    accepted: int = 0
    grants: int = 0
    final_repair: RepairReport = field(default_factory=RepairReport)
    stats: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def lose(self, request: str, why: str) -> None:
        self.lost.add(request)
        self.problems.append(f"LOST {request}: {why}")

    def duplicate(self, request: str, why: str) -> None:
        self.duplicated.add(request)
        self.problems.append(f"DUPLICATED {request}: {why}")

    def wrong_state(self, request: str, why: str) -> None:
        self.wrong.add(request)
        self.problems.append(f"WRONG {request}: {why}")

    @property
    def passed(self) -> bool:
        return not (self.lost or self.duplicated or self.wrong)


def check(config: Config, client: redis.Redis, logs: AgentLogs, garbage: set[str]) -> Findings:
    """Check conservation of a finished run; ``client`` is a direct, bytes client."""
    ledger = Ledger(client, config.namespace, config.queue, **config.ledger_kwargs())
    found = Findings(attempted=config.identities)
    for report in ledger.repair_cycle(1000):
        found.final_repair.add(report)
    records, quarantine, indexes = _read_queue(ledger)
    found.stats = ledger.stats().as_dict()
    found.quarantined = len(quarantine)
    found.identities = len(logs.acknowledged)

    decoded = _check_records(config, found, records, quarantine, indexes, garbage)
    _check_indexes(found, records, indexes)
    _check_admissions(config, found, logs, records, garbage)
    _check_settlements(found, logs, decoded, garbage)
    _check_stats(found, records, quarantine, decoded)
    return found


def _read_queue(
    ledger: Ledger,
) -> tuple[dict[str, bytes], dict[str, bytes], dict[str, dict[str, float]]]:
    client = ledger.redis
    records = {
        key.decode(): value for key, value in client.hscan_iter(ledger.records_key, count=2000)
    }
    quarantine = {
        key.decode(): value for key, value in client.hscan_iter(ledger.quarantine_key, count=2000)
    }
    keys = {"ready": ledger.ready_key, "leases": ledger.leases_key}
    keys.update({_INDEX_OF[state]: key for state, key in ledger.terminal_keys.items()})
    indexes = {
        name: {member.decode(): score for member, score in client.zscan_iter(key, count=2000)}
        for name, key in keys.items()
    }
    return records, quarantine, indexes


def _check_records(
    config: Config,
    found: Findings,
    records: dict[str, bytes],
    quarantine: dict[str, bytes],
    indexes: dict[str, dict[str, float]],
    garbage: set[str],
) -> dict[str, Any]:
    attempted = {request_id(n) for n in range(config.identities)}
    decoded: dict[str, Any] = {}
    for request, raw in records.items():
        if request not in attempted:
            found.wrong_state(request, "a record no producer admitted")
            continue
        homes = [name for name, members in indexes.items() if request in members]
        try:
            record = decode_record(request, raw)
        except CorruptRecord:
            if request not in garbage:
                found.wrong_state(request, "corrupt, but the injector never touched it")
            elif quarantine.get(request) != raw:
                found.wrong_state(
                    request, "garbage not quarantined (or another copy in quarantine)"
                )
            elif homes:
                found.wrong_state(request, f"quarantined yet still indexed in {homes}")
            found.final_states["QUARANTINED"] += 1
            continue
        decoded[request] = record
        found.final_states[record.state.value] += 1
        if request in garbage:
            found.wrong_state(
                request, "the injector's garbage was overwritten by a decodable record"
            )
        if request in quarantine:
            found.wrong_state(request, "a record that decodes is in quarantine")
        if not record.state.terminal:
            found.wrong_state(request, f"still {record.state.value} after the drain")
        if record.payload != payload_of(number_of(request)):
            found.wrong_state(request, f"payload changed to {record.payload[:40]!r}")
        if record.state is State.DEAD and record.attempts < config.max_attempts:
            found.wrong_state(request, f"DEAD after only {record.attempts} attempts")
        home = _INDEX_OF[record.state]
        if homes != [home]:
            found.wrong_state(request, f"{record.state.value} but indexed in {homes}")
        elif indexes[home][request] != record.index_score():
            found.wrong_state(
                request, f"index score {indexes[home][request]} != {record.index_score()}"
            )
    for request in quarantine:
        if request not in records:
            found.wrong_state(request, "in quarantine without a record")
    for request in garbage:
        if request not in quarantine:
            found.wrong_state(request, "overwritten with garbage but not quarantined")
    return decoded


def _check_indexes(
    found: Findings, records: dict[str, bytes], indexes: dict[str, dict[str, float]]
) -> None:
    for name, members in indexes.items():
        for request in members:
            if request not in records:
                found.wrong_state(request, f"in the {name} index without a record")


def _check_admissions(
    config: Config, found: Findings, logs: AgentLogs, records: dict[str, bytes], garbage: set[str]
) -> None:
    for request in logs.acknowledged:
        if request not in records:
            found.lose(request, "acknowledged, but no record is stored")
    # Producers send every call again until Redis answers: each id gets an answer.
    for n in range(config.identities):
        request = request_id(n)
        if request not in logs.acknowledged and request not in garbage:
            answer = logs.unacknowledged.get(request, "no answer")
            found.wrong_state(request, f"never acknowledged ({answer})")
    for kind, request, status, reason in logs.probes:
        spoiled = (
            request in garbage and status == "CONFLICT" and reason in ("corrupt", "quarantined")
        )
        if kind == "D" and status != "DUPLICATE" and not spoiled:
            found.wrong_state(request, f"a duplicate admission answered {status} {reason}")
        elif kind == "C" and status == "ADMITTED":
            found.lose(request, "a conflicting admission was ADMITTED: the original was gone")
        elif kind == "C" and not (
            status == "CONFLICT" and (reason == "payload_differs" or spoiled)
        ):
            found.wrong_state(request, f"a conflicting admission answered {status} {reason}")


def _check_settlements(
    found: Findings, logs: AgentLogs, decoded: dict[str, Any], garbage: set[str]
) -> None:
    for request in set(logs.accepted) | set(logs.grants) | set(decoded):
        accepted = logs.accepted.get(request, [])
        grants = logs.grants.get(request, [])
        found.grants += len(grants)
        found.accepted += len(accepted)
        by_fence: dict[int, list[tuple[int, str, str, int]]] = defaultdict(list)
        for entry in accepted:
            by_fence[entry[0]].append(entry)
        terminal: dict[int, str] = {}
        for fence, entries in by_fence.items():
            states = {e[1] for e in entries}
            owners = {e[2] for e in entries}
            if len(states) > 1 or len(owners) > 1:
                found.wrong_state(
                    request, f"fence {fence} settled as {sorted(states)} by {sorted(owners)}"
                )
            for state in states & _TERMINAL:
                terminal[fence] = state
        if len(terminal) > 1:
            found.duplicate(request, f"terminal settlements accepted at fences {sorted(terminal)}")
        order = sorted((min(e[3] for e in entries), fence) for fence, entries in by_fence.items())
        fences = [fence for _, fence in order]
        if fences != sorted(set(fences)):
            found.wrong_state(request, f"fences of accepted settlements in time order: {fences}")
        granted = Counter(fence for fence, _ in grants)
        twice = sorted(fence for fence, count in granted.items() if count > 1)
        if twice:
            found.wrong_state(request, f"claimed twice with fence(s) {twice}")
        if terminal:
            last = min(terminal)
            later = sorted({f for f in granted if f > last} | {f for f in by_fence if f > last})
            if later:
                found.wrong_state(
                    request, f"settled terminally at fence {last}, yet claimed at fence(s) {later}"
                )
        record = decoded.get(request)
        if record is None or request in garbage:
            continue
        if granted and record.fence < max(granted):
            found.wrong_state(request, f"stored fence {record.fence} below granted {max(granted)}")
        state = record.state.value
        if state in _TERMINAL:
            if terminal and terminal.get(record.fence) != state:
                found.wrong_state(request, f"stored {state}@{record.fence}, accepted {terminal}")
            elif not terminal and (record.fence, state) not in logs.intents.get(request, set()):
                found.wrong_state(
                    request, f"stored {state}@{record.fence}, which no worker asked for"
                )
        elif state == "DEAD" and terminal:
            found.wrong_state(request, f"DEAD, yet a terminal settlement was accepted: {terminal}")


def _check_stats(
    found: Findings,
    records: dict[str, bytes],
    quarantine: dict[str, bytes],
    decoded: dict[str, Any],
) -> None:
    stats = found.stats
    by_state = Counter(record.state for record in decoded.values())
    expected = {
        "completed": by_state[State.COMPLETED],
        "failed": by_state[State.FAILED],
        "dead": by_state[State.DEAD],
        "claimed": by_state[State.CLAIMED],
        "quarantined": len(quarantine),
        "total": len(records),
    }
    for name, value in expected.items():
        if stats[name] != value:
            found.wrong_state(f"stats.{name}", f"says {stats[name]}, the records say {value}")
    if stats["pending_due"] + stats["pending_later"] != by_state[State.PENDING]:
        found.wrong_state(
            "stats.pending", f"disagrees with {by_state[State.PENDING]} PENDING records"
        )
    parts = (
        "pending_due",
        "pending_later",
        "claimed",
        "completed",
        "failed",
        "dead",
        "quarantined",
    )
    if sum(stats[name] for name in parts) != stats["total"]:
        found.wrong_state("stats", f"counts by state do not add up to the total: {stats}")
