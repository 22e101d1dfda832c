"""Where a sharded queue lives: a row per shard in ``ledger_status`` and on the queue page."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from django_ledger.conf import get_ledger, reset_connections
from tests.support.redis_server import RedisServer, delete_namespace

pytestmark = pytest.mark.django_db

HEALTH = "/admin/django_ledger/queue/{}/change/"


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


@pytest.fixture
def on_cluster(cluster: Any, namespace: str) -> Iterator[dict[str, Any]]:
    config = {
        "CONNECTION": {"CLUSTER": cluster.startup_nodes},
        "NAMESPACE": namespace,
        "QUEUES": {"emails": {"SHARDS": 3}, "crowded": {"SHARDS": 4}},
    }
    yield config
    reset_connections()
    with cluster.client() as client:
        delete_namespace(client, namespace)


def status(*args: str) -> str:
    out = io.StringIO()
    call_command("ledger_status", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def table(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines()[1:] if line[:1].isalnum()}


def fill(queue: str, count: int = 60) -> None:
    get_ledger(queue).admit_many((f"r{n}", "p") for n in range(count))


def test_ledger_status_shows_each_shard_on_its_own_master(on_cluster: dict[str, Any]) -> None:
    with override_settings(LEDGER=on_cluster):
        fill("emails")
        out = status("--queue", "emails")
    rows = table(out)
    assert sorted(rows) == ["emails[0]", "emails[1]", "emails[2]"]
    assert len({row[2] for row in rows.values()}) == 3  # three masters
    assert sum(int(row[3]) for row in rows.values()) == 60  # due, over the shards
    assert "hint" not in out


def test_two_busy_shards_on_one_master_get_a_hint(on_cluster: dict[str, Any]) -> None:
    with override_settings(LEDGER=on_cluster):
        fill("crowded")
        out = status("--queue", "crowded")
    masters: dict[str, list[str]] = {}
    for name, row in table(out).items():
        masters.setdefault(row[2], []).append(name)
    shared = {master: names for master, names in masters.items() if len(names) > 1}
    assert shared  # four shards, three masters (other tests may move slots around)
    hints = [line for line in out.splitlines() if line.startswith("hint:")]
    assert len(hints) == len(shared)
    for master, names in shared.items():
        (hint,) = [line for line in hints if f"share the master {master}:" in line]
        assert f"{len(names)} busy shards of queue crowded" in hint
        assert all(f"{name} (slot" in hint for name in names)


def test_the_queue_page_shows_the_placement_of_every_shard(
    on_cluster: dict[str, Any], admin_client: Client
) -> None:
    with override_settings(LEDGER=on_cluster):
        fill("emails")
        text = admin_client.get(HEALTH.format("emails")).content.decode()
    placement = text[
        text.index('id="placement"') : text.index("</table>", text.index('id="placement"'))
    ]
    shards = re.findall(
        r'<tr data-shard="(\d)"><td>([^<]+)</td><td>(\d+)</td>\s*<td>([^<]+)</td>', placement
    )
    assert [s[1] for s in shards] == ["emails[0]", "emails[1]", "emails[2]"]
    assert len({s[3] for s in shards}) == 3
    assert re.search(r'data-setting="shards">3<', text)
    assert re.search(r'data-figure="total-records">60<', text)


def test_on_one_server_the_queue_page_says_so(
    redis_server: RedisServer, namespace: str, admin_client: Client
) -> None:
    config = {"CONNECTION": redis_server.url, "NAMESPACE": namespace, "QUEUES": {"q": {}}}
    with override_settings(LEDGER=config):
        text = admin_client.get(HEALTH.format("q")).content.decode()
    assert "One Redis server holds the whole queue." in text
    assert f"127.0.0.1:{redis_server.port}" in text


def test_get_ledger_builds_a_sharded_ledger_and_refuses_a_changed_layout(
    redis_server: RedisServer, namespace: str
) -> None:
    from django_ledger.core.layout import LayoutMismatch
    from django_ledger.core.sharded import ShardedLedger

    config = {
        "CONNECTION": redis_server.url,
        "NAMESPACE": namespace,
        "QUEUES": {"q": {"SHARDS": 3}},
    }
    with override_settings(LEDGER=config):
        ledger = get_ledger("q")
        assert isinstance(ledger, ShardedLedger) and len(ledger.shards) == 3
        ledger.admit("r1", "p")
    reset_connections()
    changed = {**config, "QUEUES": {"q": {"SHARDS": 2}}}
    with override_settings(LEDGER=changed), pytest.raises(LayoutMismatch, match="in 3 shard"):
        get_ledger("q")
    reset_connections()
    with override_settings(LEDGER={**config, "QUEUES": {"q": {}}}), pytest.raises(LayoutMismatch):
        get_ledger("q")


def test_get_ledger_with_redis_away_still_builds_the_ledger(namespace: str) -> None:
    from django_ledger.core.errors import LedgerUnavailable
    from tests.support.redis_server import free_port

    config = {
        "CONNECTION": f"redis://127.0.0.1:{free_port()}/0",
        "NAMESPACE": namespace,
        "QUEUES": {"plain": {}, "sharded": {"SHARDS": 3}},
        "TIMEOUTS": {"CONNECT": 0.5, "SOCKET": 0.5},
    }
    with override_settings(LEDGER=config):
        for queue in ("plain", "sharded"):
            ledger = get_ledger(queue)  # a worker starting during an outage
            with pytest.raises(LedgerUnavailable):
                ledger.admit("r1", "p")


def test_a_process_reads_a_sharded_queue_layout_once(
    redis_server: RedisServer, namespace: str
) -> None:
    from tests.support.ledger_helpers import count_calls

    config = {
        "CONNECTION": redis_server.url,
        "NAMESPACE": namespace,
        "QUEUES": {"q": {"SHARDS": 3}},
    }
    with override_settings(LEDGER=config):
        get_ledger("q").stats()  # the first ledger reads (and records) the layout
        again = get_ledger("q")  # as every API request builds its own
        with count_calls(again.redis) as calls:
            again.stats()
    assert calls.by_command.get("get", 0) == 0, calls.by_command
    assert calls.by_command.get("fcall") == 3  # one stats call per shard, nothing else
