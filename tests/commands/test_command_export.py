"""``manage.py ledger_export``: every field out, so that import elsewhere is exact."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_ledger import State, operations
from django_ledger.conf import get_ledger, reset_connections
from django_ledger.core.importing import FIELDS
from django_ledger.core.ledger import Ledger
from tests.support.redis_server import RedisServer

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
PAYLOADS = [
    "plain",
    "",
    "line\nbreak\r\n",
    "nul\x00byte",
    "emoji 🎉 and ünïcode",
    '{"json": [1, 2]}',
    'a,b,"c"',
]


def settings_for(url: str, namespace: str) -> Any:
    return override_settings(
        LEDGER={"CONNECTION": url, "NAMESPACE": namespace, "QUEUES": {"default": {}, "other": {}}}
    )


@pytest.fixture
def source(redis_server: RedisServer, namespace: str) -> Iterator[Ledger]:
    """A queue in the suite's Redis with records in every state, and one quarantined id."""
    with settings_for(redis_server.url, namespace):
        ledger = get_ledger()
        ledger.admit_many(
            [(f"p{n}", payload) for n, payload in enumerate(PAYLOADS)], traceparent=TRACE
        )
        ledger.admit("later", "due in an hour", delay=3600)
        for state in (State.COMPLETED, State.FAILED, State.PENDING):
            claim = ledger.claim("worker-1")
            assert claim is not None
            ledger.settle(claim, state, delay=60)
        held = ledger.claim("worker-2", lease=600)
        assert held is not None
        ledger.renew(held, lease=900)
        dead = Ledger(ledger.redis, ledger.namespace, ledger.queue, max_attempts=1)
        claim = dead.claim("worker-3", lease=0.01)
        assert claim is not None
        dead.clock_skew_ms = 1000
        dead.repair_records(
            [(claim.request_id, ledger.redis.hget(ledger.records_key, claim.request_id))]
        )
        ledger.redis.hset(ledger.records_key, "garbage", b"not a record")
        ledger.repair_records([("garbage", b"not a record")])
        yield ledger
    reset_connections()


def export(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ledger_export", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def snapshot(ledger: Ledger) -> dict[str, Any]:
    """Every byte of the queue: records, quarantine aside, and every index with its scores."""
    redis = ledger.redis
    records = redis.hgetall(ledger.records_key)
    records.pop(b"garbage", None)
    indexes = [ledger.ready_key, ledger.leases_key, *ledger.terminal_keys.values()]
    return {
        "records": records,
        **{key: redis.zrange(key, 0, -1, withscores=True) for key in indexes},
    }


def test_stdout_has_every_field_and_stderr_the_quarantined(source: Ledger) -> None:
    out, err = export()
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == len(PAYLOADS) + 1
    assert all(list(line) == list(FIELDS) for line in lines)
    states = {line["state"] for line in lines}
    assert states == {"PENDING", "CLAIMED", "COMPLETED", "FAILED", "DEAD"}
    assert "exported 8 record(s) of queue default" in err
    assert "skipped 1 quarantined id(s): 'garbage'" in err


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_then_import_into_another_redis_is_exact(
    source: Ledger, fresh_redis: RedisServer, namespace: str, tmp_path: Path, fmt: str
) -> None:
    path = tmp_path / f"queue.{fmt}"
    export("-o", str(path))
    before = snapshot(source)
    assert len(before["records"]) == 8
    reset_connections()
    with settings_for(fresh_redis.url, namespace):
        out = io.StringIO()
        call_command("ledger_import", str(path), stdout=out, stderr=io.StringIO())
        assert "8 imported" in out.getvalue() and "8 verified" in out.getvalue()
        target = get_ledger()
        assert snapshot(target) == before
        assert not target.gate_closed
        assert target.resolve_many([f"p{n}" for n in range(len(PAYLOADS))]) == source.resolve_many(
            [f"p{n}" for n in range(len(PAYLOADS))]
        )


def test_an_empty_queue_and_a_csv_header(source: Ledger, tmp_path: Path) -> None:
    out, err = export("--queue", "other")
    assert out == "" and "exported 0 record(s) of queue other" in err
    path = tmp_path / "other.csv"
    export("--queue", "other", "-o", str(path))
    assert path.read_text(encoding="utf-8") == ",".join(FIELDS) + "\n"


def test_corrupt_records_are_listed_and_fail(source: Ledger) -> None:
    source.redis.hset(source.records_key, "p0", b"1:00000000:broken")
    with pytest.raises(CommandError, match=r"1 record.* failed their checksum"):
        export()


def test_bad_options(source: Ledger, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="unknown ledger queue 'nope'"):
        export("--queue", "nope")
    with pytest.raises(CommandError, match="cannot write"):
        export("-o", str(tmp_path / "missing" / "dir.jsonl"))


class LiveQueue(io.StringIO):
    """Standard output that keeps the queue busy: a burst of writes every ``every`` lines.

    The export writes each HSCAN page as it reads it, so every burst falls between two
    pages of the walk: new records (enough to make Redis grow and rehash the hash),
    claims, renewals and settlements of old ones, and purges of ended ones (the hash
    shrinks: HSCAN may then return a field twice).
    """

    def __init__(self, ledger: Ledger, every: int, doomed: list[str]) -> None:
        super().__init__()
        self.ledger = ledger
        self.every = every
        self.doomed = list(doomed)
        self.lines = 0
        self.bursts = 0
        self.lines_after_first_burst = 0
        self.admitted: list[str] = []

    def write(self, text: str) -> int:
        written = super().write(text)
        new_lines = text.count("\n")
        self.lines += new_lines
        if self.bursts:
            self.lines_after_first_burst += new_lines
        if new_lines and self.lines % self.every == 0:
            self.burst()
        return written

    def burst(self) -> None:
        self.bursts += 1
        ids = [f"new-{self.bursts}-{n}" for n in range(1500)]
        self.ledger.admit_many([(request_id, BIG) for request_id in ids])
        self.admitted += ids
        claims = self.ledger.claim_many("live-worker", 30, lease=600)
        for claim in claims[:10]:
            self.ledger.settle(claim, State.COMPLETED)
        for claim in claims[10:20]:
            self.ledger.settle(claim, State.FAILED)
        for claim in claims[20:]:
            self.ledger.renew(claim, lease=900)
        for request_id in self.doomed[:300]:
            raw = self.ledger.redis.hget(self.ledger.records_key, request_id)
            operations.purge(self.ledger, request_id, operations.version_of(raw))
        del self.doomed[:300]


BIG = "x" * 100  # over 64 bytes: a real hash table, which HSCAN walks page by page


def test_export_under_live_writes_has_each_record_exactly_once(
    redis_server: RedisServer, namespace: str
) -> None:
    with settings_for(redis_server.url, namespace):
        ledger = get_ledger()
        doomed = [f"ended-{n}" for n in range(900)]  # purged during the walk
        ledger.admit_many([(request_id, BIG) for request_id in doomed])
        for claim in ledger.claim_many("worker", len(doomed), lease=600):
            ledger.settle(claim, State.COMPLETED)
        present = [f"old-{n}" for n in range(3000)]  # there for the whole walk
        ledger.admit_many([(request_id, BIG) for request_id in present])
        stdout = LiveQueue(ledger, every=500, doomed=doomed)
        err = io.StringIO()
        call_command("ledger_export", stdout=stdout, stderr=err)
        assert stdout.bursts >= 2 and stdout.lines_after_first_burst > 0, "no write fell mid-walk"
        assert not stdout.doomed, "not every ended record was purged during the walk"
        exported = [json.loads(line) for line in stdout.getvalue().splitlines()]
        ids = [line["request_id"] for line in exported]
        assert len(ids) == len(set(ids)), "a record was exported twice"
        assert set(present) <= set(ids), "a record present for the whole walk was missed"
        assert set(ids) <= set(present) | set(stdout.admitted) | set(doomed)
        assert f"exported {len(ids)} record(s) of queue default" in err.getvalue()
        assert {line["state"] for line in exported} <= {"PENDING", "CLAIMED", "COMPLETED", "FAILED"}
    reset_connections()
