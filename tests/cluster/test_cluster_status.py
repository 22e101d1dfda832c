"""``manage.py ledger_status``: each queue's slot and master, and masters two busy queues share."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from redis.crc import key_slot

from django_ledger.conf import get_ledger, reset_connections
from tests.support.cluster_server import LocalCluster
from tests.support.redis_server import RedisServer, delete_namespace, free_port


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


def status(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ledger_status", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines()[1:] if line[:1].isalnum()}


def test_on_one_server_every_queue_is_on_it(redis_server: RedisServer, namespace: str) -> None:
    config = {"CONNECTION": redis_server.url, "NAMESPACE": namespace, "QUEUES": {"a": {}, "b": {}}}
    with override_settings(LEDGER=config):
        get_ledger("a").admit("x", "payload")
        out, _ = status()
    table = rows(out)
    assert out.splitlines()[0].split() == [
        "queue", "slot", "master", "due", "later", "claimed", "ended", "quarantined", "gate",
    ]  # fmt: skip
    assert table["a"] == [
        "a",
        "-",
        f"127.0.0.1:{redis_server.port}",
        "1",
        "0",
        "0",
        "0",
        "0",
        "open",
    ]
    assert table["b"][1:4] == ["-", f"127.0.0.1:{redis_server.port}", "0"]
    assert "one Redis server" in out and "hint" not in out


@pytest.fixture
def placed(cluster: LocalCluster, namespace: str) -> Iterator[tuple[dict[str, Any], list[str]]]:
    """Three queues: two on the first master, one on the second."""
    first, second = cluster.masters()[:2]
    crowded = [cluster.queue_on(first, namespace, stem=stem) for stem in ("a", "b")]
    alone = cluster.queue_on(second, namespace, stem="c")
    config = {
        "CONNECTION": {"CLUSTER": cluster.startup_nodes},
        "NAMESPACE": namespace,
        "QUEUES": {name: {} for name in [*crowded, alone]},
    }
    yield config, [*crowded, alone]
    reset_connections()
    with cluster.client() as client:
        delete_namespace(client, namespace)


def test_on_a_cluster_each_queue_shows_its_slot_and_master(
    cluster: LocalCluster, namespace: str, placed: tuple[dict[str, Any], list[str]]
) -> None:
    config, names = placed
    with override_settings(LEDGER=config):
        for name in names:
            get_ledger(name).admit_many([("x", "1"), ("y", "2")])
        out, _ = status()
    table = rows(out)
    for name in names:
        slot = key_slot(f"{{{namespace}:{name}}}".encode())
        master = cluster.master_of_slot(slot)
        assert table[name][:4] == [name, str(slot), f"127.0.0.1:{master.port}", "2"]
    crowded, alone = names[:2], names[2]
    (hint,) = [line for line in out.splitlines() if line.startswith("hint:")]
    assert "2 busy queues share the master" in hint
    assert all(f"{name} (slot" in hint for name in crowded) and alone not in hint


def test_queues_below_the_busy_mark_give_no_hint(
    placed: tuple[dict[str, Any], list[str]],
) -> None:
    config, names = placed
    with override_settings(LEDGER=config):
        get_ledger(names[0]).admit("x", "1")
        out, _ = status()
        assert "hint:" not in out  # one busy queue on the crowded master
        for name in names:
            get_ledger(name).admit("y", "2")
        assert "hint:" in status()[0]
        assert "hint:" not in status("--busy", "3")[0]
        only = rows(status("--queue", names[2])[0])
        assert list(only) == [names[2]]


def test_an_unreachable_redis_is_a_command_error() -> None:
    config = {"CONNECTION": f"redis://127.0.0.1:{free_port()}/0", "TIMEOUTS": {"CONNECT": 0.2}}
    with override_settings(LEDGER=config), pytest.raises(CommandError, match="could not be read"):
        status()


def test_an_unknown_queue_is_a_command_error(redis_server: RedisServer) -> None:
    with (
        override_settings(LEDGER={"CONNECTION": redis_server.url}),
        pytest.raises(CommandError, match="unknown ledger queue 'nope'"),
    ):
        status("--queue", "nope")
