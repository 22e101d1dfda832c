"""Key names: one hash tag per queue, validated names, a bytes client."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
import redis
from redis.crc import key_slot

from django_ledger import Ledger, State
from tests.support.ledger_helpers import make_ledger, namespace_keys
from tests.support.redis_server import RedisServer

pytest_plugins = ["tests.support.ledger_fixtures"]


def test_key_names_carry_the_hash_tag(ledger: Ledger, namespace: str) -> None:
    tag = f"{{{namespace}:q}}"
    assert ledger.namespace == namespace
    assert ledger.queue == "q"
    assert ledger.records_key == f"{tag}:records"
    assert ledger.ready_key == f"{tag}:ready"
    assert ledger.leases_key == f"{tag}:leases"
    assert ledger.quarantine_key == f"{tag}:quarantine"
    assert ledger.gate_key == f"{tag}:gate"
    assert ledger.terminal_keys == {
        State.COMPLETED: f"{tag}:completed",
        State.FAILED: f"{tag}:failed",
        State.DEAD: f"{tag}:dead",
    }
    assert set(ledger.keys) == {
        ledger.records_key,
        ledger.ready_key,
        ledger.leases_key,
        ledger.quarantine_key,
        ledger.gate_key,
        *ledger.terminal_keys.values(),
        ledger.fences_key,
        ledger.results_key,
        ledger.runner.keys.wake,
        ledger.runner.keys.limits,
        ledger.runner.flows_key,
        ledger.runner.keys.keyed,
        ledger.runner.keys.held,
        ledger.runner.keys.cancels,
        ledger.runner.keys.unique,
        ledger.runner.keys.progress,
    }
    assert ledger.fences_key == f"{tag}:fences"
    assert ledger.results_key == f"{tag}:results"
    assert ledger.runner.keys.wake == f"{tag}:wake"
    assert ledger.runner.keys.limits == f"{tag}:limits"
    assert ledger.runner.flows_key == f"{tag}:flows"
    assert ledger.runner.keys.keyed == f"{tag}:keyed"
    assert ledger.runner.keys.held == f"{tag}:held"
    assert ledger.runner.keys.unique == f"{tag}:unique"
    assert ledger.runner.keys.progress == f"{tag}:progress"
    assert len(ledger.keys) == 18


def test_every_key_of_a_queue_is_in_one_cluster_slot(ledger: Ledger) -> None:
    slots = {key_slot(key.encode()) for key in ledger.keys}
    assert len(slots) == 1


def test_two_queues_have_disjoint_keys(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    one = make_ledger(redis_client, namespace, optimized, queue="one")
    two = make_ledger(redis_client, namespace, optimized, queue="two")
    assert not set(one.keys) & set(two.keys)
    one.admit("a", "p")
    assert two.resolve("a") is None
    assert two.admit("a", "other").status.value == "ADMITTED"


def test_only_the_queue_keys_are_written(
    ledger_factory: Callable[..., Ledger], redis_client: redis.Redis, namespace: str
) -> None:
    ledger = ledger_factory(max_attempts=1, retention=timedelta(seconds=1))
    ledger.admit_many([("a", "p"), ("b", "p"), ("c", "p"), ("{x}:records", "p")])
    a, b, _, _ = ledger.claim_many("w", 4, lease=1)
    ledger.settle(a)
    ledger.settle(b, State.FAILED)
    ledger.redis.hset(ledger.records_key, "{x}:records", b"garbage")
    ledger.clock_skew_ms += 2_000
    for _ in ledger.repair_cycle():
        pass
    ledger.close_gate()
    written = {key.decode() for key in namespace_keys(redis_client, namespace)}
    assert written <= set(ledger.keys)
    assert ledger.quarantine_key in written


@pytest.mark.parametrize(
    "name",
    [
        "",
        "with space",
        "tab\tname",
        "new\nline",
        "open{brace",
        "close}brace",
        "{both}",
        "nul\x00",
        "del\x7f",
        "x" * 101,
    ],
)
def test_bad_namespace_or_queue_is_a_value_error(
    redis_client: redis.Redis, optimized: bool, name: str
) -> None:
    with pytest.raises(ValueError):
        Ledger(redis_client, name, "q", optimized=optimized)
    with pytest.raises(ValueError):
        Ledger(redis_client, "ns", name, optimized=optimized)


@pytest.mark.parametrize("name", ["ns\n", "q\n"])
def test_trailing_newline_in_a_name_is_a_value_error(
    redis_client: redis.Redis, optimized: bool, name: str
) -> None:
    with pytest.raises(ValueError):
        Ledger(redis_client, name, "q", optimized=optimized)
    with pytest.raises(ValueError):
        Ledger(redis_client, "ns", name, optimized=optimized)


@pytest.mark.parametrize("name", [None, 1, b"ns"])
def test_non_text_namespace_or_queue_is_a_type_error(
    redis_client: redis.Redis, optimized: bool, name: object
) -> None:
    with pytest.raises(TypeError):
        Ledger(redis_client, name, "q", optimized=optimized)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Ledger(redis_client, "ns", name, optimized=optimized)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["x" * 100, "ns.with-dots_and:colons", "ünïcode", "a"])
def test_usable_names(redis_client: redis.Redis, optimized: bool, name: str) -> None:
    ledger = Ledger(redis_client, name, name, optimized=optimized)
    assert ledger.records_key == f"{{{name}:{name}}}:records"


def test_decode_responses_client_is_refused(redis_server: RedisServer, optimized: bool) -> None:
    client = redis_server.client(decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses"):
            Ledger(client, "ns", "q", optimized=optimized)
    finally:
        client.close()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_payload_bytes": 0}, ValueError),
        ({"max_payload_bytes": 512 * 1024 * 1024 + 1}, ValueError),
        ({"max_payload_bytes": 1.5}, TypeError),
        ({"max_records": 0}, ValueError),
        ({"max_records": True}, TypeError),
        ({"max_attempts": 0}, ValueError),
        ({"max_attempts": "3"}, TypeError),
        ({"optimized": 1}, TypeError),
        ({"retention": -1}, ValueError),
        ({"retention": "7d"}, TypeError),
    ],
)
def test_bad_settings_are_refused_at_construction(
    redis_client: redis.Redis, optimized: bool, kwargs: dict[str, object], error: type[Exception]
) -> None:
    given: dict[str, object] = {"optimized": optimized, **kwargs}
    with pytest.raises(error):
        Ledger(redis_client, "ns", "q", **given)  # type: ignore[arg-type]


def test_settings_are_readable(redis_client: redis.Redis, optimized: bool) -> None:
    ledger = Ledger(
        redis_client,
        "ns",
        "q",
        max_payload_bytes=10,
        max_records=20,
        optimized=optimized,
        max_attempts=3,
        retention=timedelta(hours=1),
    )
    assert (ledger.max_payload_bytes, ledger.max_records, ledger.max_attempts) == (10, 20, 3)
    assert ledger.optimized is optimized
    assert ledger.retention == timedelta(hours=1)
