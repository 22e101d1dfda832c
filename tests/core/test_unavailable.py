"""Redis down: every operation raises LedgerUnavailable, and nothing acknowledged is lost."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from django_ledger import AdmissionStatus, Claim, Ledger, LedgerError, LedgerUnavailable, State
from tests.support.ledger_helpers import make_ledger, unreachable_client
from tests.support.redis_server import RedisServer

pytest_plugins = ["tests.support.ledger_fixtures"]

CLAIM = Claim("a", "p", "w", 1, 1, 0)

OPERATIONS: list[tuple[str, Callable[[Ledger], Any]]] = [
    ("admit", lambda ledger: ledger.admit("a", "p")),
    ("admit_many", lambda ledger: ledger.admit_many([("a", "p"), ("b", "p")])),
    ("claim", lambda ledger: ledger.claim("w")),
    ("claim_many", lambda ledger: ledger.claim_many("w", 5)),
    ("renew", lambda ledger: ledger.renew(CLAIM)),
    ("settle", lambda ledger: ledger.settle(CLAIM)),
    ("settle_many", lambda ledger: ledger.settle_many([(CLAIM, State.FAILED)])),
    ("resolve", lambda ledger: ledger.resolve("a")),
    ("resolve_many", lambda ledger: ledger.resolve_many(["a", "b"])),
    ("repair", lambda ledger: ledger.repair()),
    ("repair_page", lambda ledger: ledger.repair_page("0", 10)),
    ("repair_records", lambda ledger: ledger.repair_records([("a", b"x")])),
    ("stats", lambda ledger: ledger.stats()),
    ("server_time_ms", lambda ledger: ledger.server_time_ms()),
    ("close_gate", lambda ledger: ledger.close_gate()),
    ("open_gate", lambda ledger: ledger.open_gate()),
    ("gate_closed", lambda ledger: ledger.gate_closed),
    ("import_record", lambda ledger: ledger.import_record("a", "p", State.PENDING, 0)),
]


@pytest.fixture
def unreachable(namespace: str, optimized: bool) -> Iterator[Ledger]:
    client = unreachable_client()
    yield make_ledger(client, namespace, optimized)
    client.close()


@pytest.mark.parametrize(("name", "operation"), OPERATIONS, ids=[name for name, _ in OPERATIONS])
def test_closed_port_raises_ledger_unavailable(
    unreachable: Ledger, name: str, operation: Callable[[Ledger], Any]
) -> None:
    with pytest.raises(LedgerUnavailable) as caught:
        operation(unreachable)
    assert isinstance(caught.value, LedgerError)
    assert isinstance(caught.value.__cause__, redis.ConnectionError)


def test_stopped_server_then_restarted(
    fresh_redis: RedisServer, namespace: str, optimized: bool
) -> None:
    client = fresh_redis.client(socket_connect_timeout=1, socket_timeout=2)
    ledger = make_ledger(client, namespace, optimized)
    try:
        assert ledger.admit("kept", "p").status is AdmissionStatus.ADMITTED
        claim = ledger.claim("w", lease=600)
        assert claim is not None

        fresh_redis.kill()
        for _, operation in OPERATIONS:
            with pytest.raises(LedgerUnavailable):
                operation(ledger)

        fresh_redis.restart()
        # What Redis acknowledged survived (AOF, fsync always), and the same ledger
        # object works again: its scripts are reloaded behind the scenes.
        record = ledger.resolve("kept")
        assert record is not None
        assert (record.state, record.owner) == (State.CLAIMED, "w")
        assert ledger.settle(claim).ok
        assert ledger.admit("kept", "p").status is AdmissionStatus.DUPLICATE
        assert ledger.admit("new", "p").status is AdmissionStatus.ADMITTED
    finally:
        client.close()


def test_the_message_says_what_could_not_be_reached_and_why(namespace: str) -> None:
    client = unreachable_client()
    port = client.connection_pool.connection_kwargs["port"]
    ledger = Ledger(client, namespace, "tasks")
    try:
        with pytest.raises(LedgerUnavailable) as caught:
            ledger.admit("a", "p")
    finally:
        client.close()
    message = str(caught.value)
    assert message.startswith(
        f"Redis is unavailable at 127.0.0.1:{port} for queue {namespace}:tasks"
    )
    assert "Connection refused" in message
    assert "<Ledger" not in message  # the ledger's repr says nothing a reader can act on


def test_the_message_names_a_unix_socket(tmp_path: Any, namespace: str) -> None:
    path = tmp_path / "nothing.sock"
    client = redis.Redis(unix_socket_path=str(path), retry=None)
    try:
        with pytest.raises(LedgerUnavailable) as caught:
            Ledger(client, namespace, "tasks").stats()
    finally:
        client.close()
    assert f"Redis is unavailable at {path} for queue {namespace}:tasks" in str(caught.value)
    assert "No such file or directory" in str(caught.value)
