"""The short run of the proof of conservation (the long one: benchmarks/conservation.py).

10,000 identities, 2 producers, 4 workers (one with its clock hours off) and a repair
loop, against a Redis with AOF (``appendfsync always``) behind a fault proxy, while
every fault kind lands at least twice: workers SIGKILLed mid-lease, workers paused
(SIGSTOP) until others hold their records, Redis SIGKILLed and restarted from its AOF, connections dropped, stalled and half-closed, the
ledger's functions flushed, records overwritten with garbage. Then every identity is checked; see
``tests/support/harness/checker.py`` for the rules and ``docs/reliability.md`` for the figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from django_ledger import AdmissionStatus, Ledger, State
from tests.support.harness import FAULT_KINDS, Config, run
from tests.support.harness.checker import check
from tests.support.harness.config import payload_of, request_id
from tests.support.harness.logs import AgentLogs


def test_nothing_admitted_is_lost_or_settled_twice(tmp_path: Path) -> None:
    # Admissions are spread over 20 of the 24 s of faults, so that work flows while they land.
    config = Config(
        identities=10_000,
        workers=4,
        producers=2,
        duration=24.0,
        admit_seconds=20.0,
        workdir=str(tmp_path),
    )

    outcome = run(config, echo=print)

    print(outcome.table)
    # Every identity is acknowledged, but for one whose reply was lost and which the
    # injector spoiled before the producer asked again (then it must be quarantined).
    assert 10_000 - outcome.findings.identities <= len(outcome.garbage)
    assert all(outcome.faults[kind] >= 1 for kind in FAULT_KINDS), outcome.faults
    assert outcome.mid_lease_kills >= 1, "no worker was killed while holding claims"
    assert outcome.logs.skewed_settlements > 0, "the worker with a skewed clock settled nothing"
    assert outcome.drained, "the queue did not drain"
    assert outcome.lost == 0
    assert outcome.duplicated == 0
    assert outcome.wrong == 0
    assert outcome.findings.quarantined == len(outcome.garbage) > 0
    assert outcome.passed


# -- the check itself can fail ---------------------------------------------------------


def _settled_queue(redis_client: redis.Redis, namespace: str) -> tuple[Config, Ledger, AgentLogs]:
    """Four identities, each claimed once and settled; logs as the agents would write them."""
    config = Config(identities=4, namespace=namespace, queue="q")
    ledger = Ledger(redis_client, namespace, "q", **config.ledger_kwargs())
    logs = AgentLogs()
    for n in range(4):
        assert ledger.admit(request_id(n), payload_of(n)).status is AdmissionStatus.ADMITTED
        logs.acknowledged.add(request_id(n))
    for claim in ledger.claim_many("worker-1.0", 4):
        state = State.FAILED if claim.request_id == request_id(3) else State.COMPLETED
        logs.grants[claim.request_id].append((claim.fence, claim.owner))
        logs.intents[claim.request_id].add((claim.fence, state.value))
        answer = ledger.settle(claim, state)
        assert answer.record is not None
        logs.accepted[claim.request_id].append(
            (claim.fence, state.value, claim.owner, answer.record.updated_at)
        )
    return config, ledger, logs


def test_the_check_passes_a_clean_queue(redis_client: redis.Redis, namespace: str) -> None:
    config, _, logs = _settled_queue(redis_client, namespace)

    found = check(config, redis_client, logs, garbage=set())

    assert found.passed, found.problems
    assert found.final_states == {"COMPLETED": 3, "FAILED": 1}


def test_the_check_finds_a_lost_identity(redis_client: redis.Redis, namespace: str) -> None:
    config, ledger, logs = _settled_queue(redis_client, namespace)
    redis_client.hdel(ledger.records_key, request_id(0))

    found = check(config, redis_client, logs, garbage=set())

    assert found.lost == {request_id(0)}


def test_the_check_finds_a_duplicated_settlement(redis_client: redis.Redis, namespace: str) -> None:
    config, _, logs = _settled_queue(redis_client, namespace)
    fence, state, _, updated = logs.accepted[request_id(1)][0]
    logs.accepted[request_id(1)].append((fence + 1, state, "worker-2.0", updated + 1))

    found = check(config, redis_client, logs, garbage=set())

    assert found.duplicated == {request_id(1)}


@pytest.mark.parametrize(
    "fault", ["stuck", "undeclared_garbage", "unasked_state", "unacknowledged"]
)
def test_the_check_finds_wrong_states(
    redis_client: redis.Redis, namespace: str, fault: str
) -> None:
    config, ledger, logs = _settled_queue(redis_client, namespace)
    if fault == "stuck":
        config.identities = 5
        ledger.admit(request_id(4), payload_of(4))
        logs.acknowledged.add(request_id(4))
    elif fault == "undeclared_garbage":
        redis_client.hset(ledger.records_key, request_id(2), b"garbage")
    elif fault == "unasked_state":
        logs.accepted.pop(request_id(3))
        logs.intents[request_id(3)] = {(1, "COMPLETED")}
    else:
        logs.acknowledged.discard(request_id(2))

    found = check(config, redis_client, logs, garbage=set())

    assert not found.passed
    assert found.wrong and not found.lost and not found.duplicated, found.problems
