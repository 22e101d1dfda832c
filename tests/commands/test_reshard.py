"""``manage.py ledger_reshard``: a queue's records moved to another number of shards."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_ledger import State
from django_ledger.conf import build_ledger, get_ledger, reset_connections
from django_ledger.core.layout import layout_key, stored_shards
from django_ledger.core.ledger import Ledger
from tests.support.ledger_helpers import corrupt


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


def settings_for(redis_client: redis.Redis, namespace: str, shards: int) -> dict[str, Any]:
    if isinstance(redis_client, redis.RedisCluster):
        nodes = [f"{n.host}:{n.port}" for n in redis_client.get_primaries()]
        connection: Any = {"CLUSTER": nodes}
    else:
        kwargs = redis_client.connection_pool.connection_kwargs
        connection = f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs.get('db', 0)}"
    return {"CONNECTION": connection, "NAMESPACE": namespace, "QUEUES": {"q": {"SHARDS": shards}}}


def reshard(*args: str) -> str:
    out = io.StringIO()
    call_command("ledger_reshard", "--queue", "q", *args, stdout=out)
    return out.getvalue()


def fill(ledger: Ledger) -> dict[str, tuple[Any, ...]]:
    """Records in every state a stopped queue can hold; returns what each must stay."""
    ledger.admit_many((f"r{n}", f"payload {n}") for n in range(60))
    ledger.admit("urgent", "p", priority=50)
    ledger.admit("later", "p", delay=3600)
    claims = ledger.claim_many("w", 30)
    ledger.settle_many((c, State.COMPLETED, 0, f"out {c.request_id}") for c in claims[:20])
    ledger.settle_many((c, State.FAILED) for c in claims[20:25])
    ledger.settle_many((c, State.PENDING, 10) for c in claims[25:])
    ids = [f"r{n}" for n in range(60)] + ["urgent", "later"]
    return {
        r.request_id: (r.state, r.attempts, r.fence, r.due_at, r.payload, r.priority)
        for r in ledger.resolve_many(ids)
        if r is not None
    }


@pytest.mark.parametrize(("before", "after"), [(1, 3), (3, 1), (3, 2)])
def test_every_record_moves_to_the_new_layout_as_it_was(
    before: int, after: int, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    with override_settings(LEDGER=settings_for(redis_client, namespace, before)):
        old = get_ledger("q")
        expected = fill(old)
        results = old.results([f"r{n}" for n in range(60)])
    backup = tmp_path / "q.jsonl"
    with override_settings(LEDGER=settings_for(redis_client, namespace, after)):
        with pytest.raises(Exception, match="holds records in"):
            get_ledger("q")  # the new setting refuses the old layout until resharded
        planned = reshard("--backup", str(tmp_path / "plan.jsonl"))
        assert "would move queue q: 62 record(s)" in planned
        assert not (tmp_path / "plan.jsonl").exists()
        out = reshard("--backup", str(backup), "--yes")
        assert f"from {before} shard(s) to {after}: 62 written, 62 read back" in out
        reset_connections()
        new = get_ledger("q")  # accepted now
        assert len(new.shards) == after
        found = {
            r.request_id: (r.state, r.attempts, r.fence, r.due_at, r.payload, r.priority)
            for r in new.resolve_many(list(expected))
            if r is not None
        }
        assert found == expected
        assert not new.gate_closed
        assert len(backup.read_text().splitlines()) == 62
        assert json.loads(backup.read_text().splitlines()[0])["request_id"]
        # Duplicates are recognised in the new layout, and fences keep growing.
        assert new.admit("r3", "payload 3").status.name == "DUPLICATE"
        stats = new.stats()
        assert (stats.completed, stats.failed, stats.total) == (20, 5, 62)
        assert new.results([f"r{n}" for n in range(60)]) == results  # task results kept
        assert new.claim_many("w", 100)  # work goes on
        # The old layout's shards that the new one does not reuse hold no key any more.
        kept = {shard.queue for shard in new.shards}
        gone = [s for s in build_ledger("q", before).shards if s.queue not in kept]
        assert gone or before == 1
        assert all(redis_client.exists(*shard.keys) == 0 for shard in gone)


def test_nothing_to_do_when_the_layout_agrees(
    redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    with override_settings(LEDGER=settings_for(redis_client, namespace, 3)):
        get_ledger("q").admit("r1", "p")
        out = reshard("--backup", str(tmp_path / "b.jsonl"), "--yes")
    assert "laid out in 3 shard(s) already" in out
    assert not (tmp_path / "b.jsonl").exists()


def test_refused_while_a_record_is_claimed_and_nothing_changes(
    redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    with override_settings(LEDGER=settings_for(redis_client, namespace, 1)):
        old = get_ledger("q")
        old.admit_many([("a", "p"), ("b", "p")])
        old.claim("w")
    with override_settings(LEDGER=settings_for(redis_client, namespace, 3)):
        with pytest.raises(
            CommandError, match=r"1 record\(s\) are claimed: stop the queue's workers"
        ):
            reshard("--backup", str(tmp_path / "b.jsonl"), "--yes")
        probe = build_ledger("q", 1)
        assert stored_shards(probe.runner, namespace, "q") == 1
        assert not probe.gate_closed  # opened again, as it was
        assert probe.stats().total == 2
        assert not (tmp_path / "b.jsonl").exists()


def test_refused_with_quarantined_ids_or_an_existing_backup(
    redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    with override_settings(LEDGER=settings_for(redis_client, namespace, 1)):
        old = get_ledger("q")
        old.admit_many([("a", "p"), ("b", "p")])
    taken = tmp_path / "taken.jsonl"
    taken.write_text("")
    with override_settings(LEDGER=settings_for(redis_client, namespace, 3)):
        with pytest.raises(CommandError, match="exists: give a new file"):
            reshard("--backup", str(taken), "--yes")
        corrupt(build_ledger("q", 1), "b")
        list(build_ledger("q", 1).repair_cycle())  # quarantines it
        with pytest.raises(CommandError, match="quarantined: discard or restore them first"):
            reshard("--backup", str(tmp_path / "b.jsonl"), "--yes")
        assert redis_client.get(layout_key(namespace, "q")) is None
        assert build_ledger("q", 1).resolve("a") is not None
