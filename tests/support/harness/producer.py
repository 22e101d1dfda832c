"""A producer: admits its identities in batches, with duplicates and conflicts mixed in.

Log lines (tab-separated):

* ``A id``: the ledger acknowledged this identity (``ADMITTED``, or ``DUPLICATE`` and
  ``resolve`` then found the record);
* ``U id status reason``: an identity of this producer that was never acknowledged;
* ``D id status reason``: a duplicate (same id, same payload) sent again, and its answer;
* ``C id status reason``: a conflict (same id, another payload) sent, and its answer;
* ``E unavailable``: one ``LedgerUnavailable`` (the call is then sent again);
* ``Z``: the producer finished every batch.
"""

from __future__ import annotations

import time

from django_ledger import AdmissionStatus, CorruptRecord
from tests.support.harness.agent import Agent
from tests.support.harness.config import conflicting_payload_of, payload_of, request_id

__all__ = ["run"]

#: Stands for a record that exists but no longer decodes (spoiled by the injector).
_EXISTS = object()


def run(agent: Agent) -> None:
    config = agent.config
    numbers = config.ids_of_producer(agent.index)
    acknowledged: list[int] = []
    rate = len(numbers) / max(config.admission_seconds, 0.001)
    started = time.monotonic()
    done = 0
    for start in range(0, len(numbers), config.admit_batch):
        if agent.stopping:
            return
        fresh = numbers[start : start + config.admit_batch]
        duplicates, conflicts = _probes(agent, acknowledged, len(fresh))
        requests = (
            [(request_id(n), payload_of(n)) for n in fresh]
            + [(request_id(n), payload_of(n)) for n in duplicates]
            + [(request_id(n), conflicting_payload_of(n)) for n in conflicts]
        )
        answers = agent.patiently(lambda requests=requests: agent.ledger.admit_many(requests))
        if answers is None:
            return
        lines: list[str] = []
        confirm: list[int] = []
        for n, answer in zip(fresh, answers[: len(fresh)], strict=True):
            if answer.status is AdmissionStatus.ADMITTED:
                lines.append(f"A\t{request_id(n)}")
                acknowledged.append(n)
            elif answer.status is AdmissionStatus.DUPLICATE:
                # Ours from an interrupted call, or another producer's: acknowledged
                # only once resolve finds the record.
                confirm.append(n)
            else:
                lines.append(f"U\t{request_id(n)}\t{answer.status}\t{answer.reason}")
        for n in _confirmed(agent, confirm):
            lines.append(f"A\t{request_id(n)}")
            acknowledged.append(n)
        tail = answers[len(fresh) :]
        for n, answer in zip(duplicates, tail[: len(duplicates)], strict=True):
            lines.append(f"D\t{request_id(n)}\t{answer.status}\t{answer.reason}")
        for n, answer in zip(conflicts, tail[len(duplicates) :], strict=True):
            lines.append(f"C\t{request_id(n)}\t{answer.status}\t{answer.reason}")
        agent.log(lines)
        done += len(fresh)
        ahead = done / rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    agent.log(["Z"])


def _probes(agent: Agent, acknowledged: list[int], size: int) -> tuple[list[int], list[int]]:
    config = agent.config
    wanted_d = min(len(acknowledged), round(size * config.duplicate_rate))
    wanted_c = min(len(acknowledged) - wanted_d, round(size * config.conflict_rate))
    picked = agent.random.sample(acknowledged, wanted_d + wanted_c) if acknowledged else []
    return picked[:wanted_d], picked[wanted_d:]


def _confirmed(agent: Agent, numbers: list[int]) -> list[int]:
    if not numbers:
        return []
    ids = [request_id(n) for n in numbers]
    try:
        records = agent.patiently(lambda: agent.ledger.resolve_many(ids)) or [None] * len(ids)
    except CorruptRecord:
        records = [_resolve_one(agent, request) for request in ids]
    found: list[int] = []
    for n, record in zip(numbers, records, strict=True):
        if record is not None and (record is _EXISTS or record.payload == payload_of(n)):
            found.append(n)
        else:
            agent.log([f"U\t{request_id(n)}\tDUPLICATE\tnot_resolved"])
    return found


def _resolve_one(agent: Agent, request: str) -> object:
    try:
        return agent.patiently(lambda: agent.ledger.resolve(request))
    except CorruptRecord:
        # The fault injector overwrote it with garbage since it was stored: it exists.
        return _EXISTS
