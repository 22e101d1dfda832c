"""``manage.py ledger_import``: gated, batched, verified, resumable offline migration."""

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

from django_ledger import AdmissionStatus, State
from django_ledger.conf import get_ledger, reset_connections
from django_ledger.core.ledger import Ledger
from tests.support.redis_server import RedisServer

NOW = 1_764_493_200_000


@pytest.fixture
def queues(redis_server: RedisServer, namespace: str) -> Iterator[None]:
    config = {
        "CONNECTION": redis_server.url,
        "NAMESPACE": namespace,
        "QUEUES": {
            "default": {},
            "big": {"MAX_RECORDS": 200_000},
            "small": {"MAX_RECORDS": 5, "MAX_PAYLOAD_BYTES": 10},
        },
    }
    with override_settings(LEDGER=config):
        yield
    reset_connections()


def record(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "request_id": f"r{n}",
        "payload": f"payload {n}",
        "state": "PENDING",
        "due_at": NOW + n,
        **fields,
    }


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for line in lines:
            handle.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return path


def run(*args: str, **options: Any) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    options.setdefault("stderr", err)
    call_command("ledger_import", *args, stdout=out, **options)
    return out.getvalue(), err.getvalue()


def fail(*args: str, **options: Any) -> tuple[str, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("ledger_import", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue(), str(caught.value)


def count(ledger: Ledger) -> int:
    return int(ledger.redis.hlen(ledger.records_key))


def test_imports_every_state_and_opens_the_gate(queues: None, tmp_path: Path) -> None:
    lines = [
        record(1, traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        record(2, state="CLAIMED", owner="w1", attempts=2, fence=7, lease_until=NOW + 60_000),
        record(3, state="COMPLETED", attempts=1, fence=1, created_at=NOW - 5, updated_at=NOW - 1),
        record(4, state="FAILED"),
        record(5, state="DEAD", attempts=16, fence=16),
    ]
    out, _ = run(str(write_jsonl(tmp_path / "in.jsonl", lines)))
    assert "5 line(s) read, 5 imported, 0 already present, 5 verified" in out
    assert "gate opened" in out
    ledger = get_ledger()
    assert not ledger.gate_closed
    r1, r2, r3, r4, r5 = ledger.resolve_many(["r1", "r2", "r3", "r4", "r5"])
    assert r1 is not None and r1.state is State.PENDING and r1.due_at == NOW + 1
    assert r1.traceparent == lines[0]["traceparent"]
    assert r2 is not None and (r2.state, r2.owner, r2.attempts, r2.fence) == (
        State.CLAIMED,
        "w1",
        2,
        7,
    )
    assert r2.lease_until == NOW + 60_000
    assert r3 is not None and (r3.created_at, r3.updated_at) == (NOW - 5, NOW - 1)
    assert r4 is not None and r4.state is State.FAILED
    assert r5 is not None and r5.state is State.DEAD
    # The derived indexes were written with the records.
    assert ledger.redis.zscore(ledger.ready_key, "r1") == NOW + 1
    assert ledger.redis.zscore(ledger.leases_key, "r2") == NOW + 60_000
    assert ledger.redis.zscore(ledger.terminal_keys[State.COMPLETED], "r3") == NOW - 1


def test_running_the_same_file_again_is_harmless(queues: None, tmp_path: Path) -> None:
    path = str(write_jsonl(tmp_path / "in.jsonl", [record(n) for n in range(20)]))
    run(path)
    ledger = get_ledger()
    before = ledger.redis.hgetall(ledger.records_key)
    out, _ = run(path)
    assert "20 line(s) read, 0 imported, 20 already present, 20 verified" in out
    assert "gate opened" in out
    assert ledger.redis.hgetall(ledger.records_key) == before


def test_one_hundred_thousand_lines(queues: None, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for n in range(100_000):
            handle.write(
                f'{{"request_id":"b{n}","payload":"p{n}","state":"PENDING","due_at":{NOW + n}}}\n'
            )
    out, err = run(
        str(path), "--queue", "big", "--batch-size", "20000", "--progress-every", "25000"
    )
    assert "100000 line(s) read, 100000 imported, 0 already present, 100000 verified" in out
    assert "gate opened" in out
    assert "25,000 lines read" in err and "100,000 lines read" in err
    ledger = get_ledger("big")
    assert count(ledger) == 100_000
    assert ledger.redis.zcard(ledger.ready_key) == 100_000
    assert ledger.resolve("b99999") is not None


def test_a_bad_line_is_reported_by_number_and_its_batch_is_not_written(
    queues: None, tmp_path: Path
) -> None:
    lines: list[Any] = [record(n) for n in range(1, 1001)]
    lines[499] = record(500, state="LOST")  # line 500
    lines[799] = "{not json"  # line 800
    path = write_jsonl(tmp_path / "in.jsonl", lines)
    _, err, message = fail(str(path), "--batch-size", "100")
    assert "bad line 500 ('r500'): state must be one of" in err
    assert "bad line 800: not JSON" in err
    assert "2 bad line(s)" in message
    ledger = get_ledger()
    # Lines 1-400 (whole batches before the bad line) are in; nothing after them.
    assert count(ledger) == 400
    assert ledger.resolve("r400") is not None and ledger.resolve("r401") is None
    assert ledger.gate_closed, "the gate stays closed until every line agrees"
    # Fixed, the same file resumes where it stopped and opens the gate.
    lines[499], lines[799] = record(500), record(800)
    out, _ = run(str(write_jsonl(path, lines)), "--batch-size", "100")
    assert "1000 line(s) read, 600 imported, 400 already present, 1000 verified" in out
    assert not ledger.gate_closed


def test_line_numbers_count_blank_lines(queues: None, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [record(1), "", "  ", record(2, due_at="soon")])
    _, err, _ = fail(str(path))
    assert "bad line 4 ('r2'): due_at must be epoch milliseconds" in err


def test_a_conflicting_identity_is_listed_and_fails(queues: None, tmp_path: Path) -> None:
    ledger = get_ledger()
    assert ledger.admit("r2", "what producers sent").status is AdmissionStatus.ADMITTED
    path = write_jsonl(tmp_path / "in.jsonl", [record(1), record(2), record(3)])
    out, err, message = fail(str(path))
    assert "conflict line 2 ('r2'): differs: due_at,payload" in err
    assert "1 conflict(s)" in message
    assert "2 imported" in out and "gate left closed" in out
    assert ledger.resolve("r2").payload == "what producers sent"  # type: ignore[union-attr]
    assert ledger.gate_closed


def test_an_interrupted_import_resumes(queues: None, tmp_path: Path) -> None:
    lines = [record(n) for n in range(1000)]
    # The first run was cut off after 600 lines (Redis went away, the operator hit Ctrl-C...).
    run(str(write_jsonl(tmp_path / "prefix.jsonl", lines[:600])), "--keep-gate")
    ledger = get_ledger()
    assert ledger.gate_closed
    out, _ = run(str(write_jsonl(tmp_path / "all.jsonl", lines)))
    assert "1000 line(s) read, 400 imported, 600 already present, 1000 verified" in out
    assert count(ledger) == 1000
    assert not ledger.gate_closed


def test_dry_run_writes_nothing(queues: None, tmp_path: Path) -> None:
    ledger = get_ledger()
    existing = ledger.admit("r1", "payload 1").record
    assert existing is not None
    path = write_jsonl(
        tmp_path / "in.jsonl", [record(1, due_at=existing.due_at), record(2), record(3)]
    )
    out, _ = run(str(path), "--dry-run")
    assert "3 line(s) read, 2 would be imported, 1 already present" in out
    assert "nothing written" in out
    assert count(ledger) == 1
    assert not ledger.gate_closed

    write_jsonl(path, [record(1, payload="other"), record(2, state="NOPE")])
    _, err, message = fail(str(path), "--dry-run")
    assert "conflict line 1 ('r1'): differs: due_at,payload" in err
    assert "bad line 2 ('r2')" in err
    assert "nothing was written" in message
    assert count(ledger) == 1 and not ledger.gate_closed


class GateProbe(io.StringIO):
    """A stderr that notes whether the gate is closed each time progress is written."""

    def __init__(self, ledger: Ledger, open_it: bool = False) -> None:
        super().__init__()
        self.ledger = ledger
        self.open_it = open_it
        self.seen: list[bool] = []

    def write(self, text: str) -> int:
        if "lines read" in text:
            self.seen.append(self.ledger.gate_closed)
            if self.open_it:
                self.ledger.open_gate()
        return super().write(text)


def test_the_gate_is_closed_during_the_import_and_opened_after(
    queues: None, tmp_path: Path
) -> None:
    ledger = get_ledger()
    probe = GateProbe(ledger)
    path = write_jsonl(tmp_path / "in.jsonl", [record(n) for n in range(50)])
    run(str(path), "--batch-size", "10", "--progress-every", "10", stderr=probe)
    assert probe.seen == [True] * 5
    assert not ledger.gate_closed

    run(str(path), "--keep-gate")
    assert ledger.gate_closed, "--keep-gate leaves it closed"


def test_an_import_stops_if_the_gate_is_opened_under_it(queues: None, tmp_path: Path) -> None:
    ledger = get_ledger()
    probe = GateProbe(ledger, open_it=True)
    path = write_jsonl(tmp_path / "in.jsonl", [record(n) for n in range(30)])
    out = io.StringIO()
    with pytest.raises(CommandError, match="gate of queue 'default' was opened during the import"):
        call_command(
            "ledger_import", str(path), "--batch-size", "10", "--progress-every", "10",
            stdout=out, stderr=probe,
        )  # fmt: skip
    assert count(ledger) == 10
    assert "gate opened by someone else" in out.getvalue()
    assert "failed line 11 ('r10'): gate_open" in probe.getvalue()


def test_csv(queues: None, tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text(
        "request_id,payload,state,due_at,owner,lease_until,traceparent\n"
        f'c1,"a, ""quoted""\nmulti-line payload",PENDING,{NOW},,,\n'
        f"c2,,CLAIMED,{NOW},worker,{NOW + 1000},\n"
        f"c3,x,COMPLETED,{NOW},,,\n",
        encoding="utf-8",
    )
    out, _ = run(str(path))
    assert "3 line(s) read, 3 imported" in out
    c1, c2, c3 = get_ledger().resolve_many(["c1", "c2", "c3"])
    assert c1 is not None and c1.payload == 'a, "quoted"\nmulti-line payload' and c1.owner == ""
    assert c1.traceparent is None
    assert c2 is not None and c2.payload == "" and c2.lease_until == NOW + 1000
    assert c3 is not None and c3.state is State.COMPLETED

    # Line numbers are the file's lines, multi-line cells included.
    path.write_text(
        f'request_id,payload,state,due_at\nd1,"two\nlines",PENDING,{NOW}\nd2,x,PENDING,soon\n',
        encoding="utf-8",
    )
    _, err, _ = fail(str(path), "--format", "csv")
    assert "bad line 4: due_at must be a whole number, got 'soon'" in err
    path.write_text("request_id,payload,state,due_at\nd3,x,PENDING,\u00b2\n", encoding="utf-8")
    _, err, _ = fail(str(path), "--format", "csv")
    assert "bad line 2: due_at must be a whole number, got '\u00b2'" in err

    path.write_text("request_id,colour\nx,red\n", encoding="utf-8")
    _, err, _ = fail(str(path))
    assert "bad line 1: unknown column(s): colour" in err


def test_standard_input(queues: None) -> None:
    data = "\n".join(json.dumps(record(n)) for n in range(3)).encode()
    out, _ = run("-", stdin=io.BytesIO(data))
    assert "3 line(s) read, 3 imported" in out
    assert count(get_ledger()) == 3


def test_a_full_queue_and_an_oversized_payload_fail(queues: None, tmp_path: Path) -> None:
    lines: list[Any] = [record(n, payload="tiny") for n in range(7)]
    lines[6] = record(6, payload="far too large for this queue")
    _, err, message = fail(str(write_jsonl(tmp_path / "in.jsonl", lines)), "--queue", "small")
    assert "bad line 7 ('r6'): payload is 28 bytes, over the queue's limit of 10" in err
    # The bad line kept its batch from being written at all.
    assert count(get_ledger("small")) == 0

    _, err, message = fail(str(write_jsonl(tmp_path / "in.jsonl", lines[:6])), "--queue", "small")
    assert "failed line 6 ('r5'): max_records" in err
    assert "1 failed" in message
    assert count(get_ledger("small")) == 5


def test_bad_options(queues: None, tmp_path: Path) -> None:
    path = str(write_jsonl(tmp_path / "in.jsonl", [record(1)]))
    with pytest.raises(
        CommandError, match=r"unknown ledger queue 'nope'.*'default', 'big', 'small'"
    ):
        run(path, "--queue", "nope")
    with pytest.raises(CommandError, match="--batch-size"):
        run(path, "--batch-size", "0")
    with pytest.raises(CommandError, match="cannot read"):
        run(str(tmp_path / "missing.jsonl"))


class Crash(io.StringIO):
    """A stderr that kills Redis when the import reports its first progress."""

    def __init__(self, server: RedisServer) -> None:
        super().__init__()
        self.server = server

    def write(self, text: str) -> int:
        if "lines read" in text and self.server.running:
            self.server.kill()
        return super().write(text)


def test_redis_dying_mid_import_then_resuming(
    fresh_redis: RedisServer, namespace: str, tmp_path: Path
) -> None:
    path = str(write_jsonl(tmp_path / "in.jsonl", [record(n) for n in range(300)]))
    with override_settings(LEDGER={"CONNECTION": fresh_redis.url, "NAMESPACE": namespace}):
        with pytest.raises(CommandError, match="The import stopped; run the same command again"):
            call_command(
                "ledger_import", path, "--batch-size", "100", "--progress-every", "100",
                stdout=io.StringIO(), stderr=Crash(fresh_redis),
            )  # fmt: skip
        fresh_redis.restart()  # replays its AOF: the first batch and the closed gate
        ledger = get_ledger()
        assert count(ledger) == 100 and ledger.gate_closed
        out, _ = run(path)
        assert "300 line(s) read, 200 imported, 100 already present, 300 verified" in out
        assert not ledger.gate_closed
    reset_connections()
