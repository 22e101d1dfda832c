"""``manage.py ledger_repair``: cycles over queues, counts per cycle, clean stops, errors."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_ledger import State
from django_ledger.conf import get_ledger, reset_connections
from django_ledger.core.ledger import Ledger
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
# Records over 64 bytes make a real hash table, which HSCAN walks page by page (a small
# hash is one compact listpack, returned whole).
BIG = "x" * 80
LINE = re.compile(r"cycle (\d+) queue (\S+): (.*)")


def config(url: str, namespace: str) -> dict[str, Any]:
    return {
        "CONNECTION": url,
        "NAMESPACE": namespace,
        "QUEUES": {
            "default": {},
            "emails": {"MAX_ATTEMPTS": 1},
            "reports": {"RETENTION": 0},
        },
    }


@pytest.fixture
def queues(redis_server: RedisServer, namespace: str) -> Iterator[None]:
    with override_settings(LEDGER=config(redis_server.url, namespace)):
        yield
    reset_connections()


def run(*args: str, stdout: Any = None) -> tuple[str, str]:
    out, err = stdout or io.StringIO(), io.StringIO()
    call_command("ledger_repair", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def cycles(output: str) -> list[tuple[int, str, dict[str, int]]]:
    found = []
    for cycle, queue, counts in LINE.findall(output):
        figures = dict(pair.split("=") for pair in counts.split()[:7])
        found.append((int(cycle), queue, {key: int(value) for key, value in figures.items()}))
    return found


def expire(ledger: Ledger, count: int = 1) -> None:
    """Claim ``count`` records under a lease of 50 ms and let it run out."""
    assert len(ledger.claim_many("w", count, lease=0.05)) == count
    time.sleep(0.1)


def test_one_cycle_over_every_queue_says_what_it_did(queues: None) -> None:
    default, emails, reports = get_ledger("default"), get_ledger("emails"), get_ledger("reports")
    default.admit_many([(f"d{n}", "x") for n in range(10)])
    default.redis.zrem(default.ready_key, "d0", "d1")  # two lost index entries
    expire(default, 3)
    default.redis.hset(default.records_key, "garbage", b"not a record")
    emails.admit_many([("e1", "x"), ("e2", "x")])
    expire(emails, 2)  # MAX_ATTEMPTS 1: DEAD
    reports.admit("r1", "x")
    claim = reports.claim("w")
    assert claim is not None
    reports.settle(claim, State.COMPLETED)  # RETENTION 0: purged

    out, err = run()
    assert err == ""
    found = {queue: counts for _, queue, counts in cycles(out)}
    assert list(found) == ["default", "emails", "reports"]
    assert found["default"] == {
        "scanned": 11, "reindexed": 2, "expired": 3, "dead": 0,
        "quarantined": 1, "purged": 0, "stale": 0,
    }  # fmt: skip
    assert found["emails"]["dead"] == 2 and found["emails"]["scanned"] == 2
    assert found["reports"]["purged"] == 1
    assert default.stats().claimed == 0 and default.stats().quarantined == 1
    assert emails.stats().dead == 2
    assert reports.resolve("r1") is None

    # A second cycle finds nothing left to do.
    again = {queue: counts for _, queue, counts in cycles(run()[0])}
    assert again["default"]["reindexed"] == again["default"]["expired"] == 0


def test_named_queues_only(queues: None) -> None:
    out, _ = run("emails", "reports", "emails")
    assert [queue for _, queue, _ in cycles(out)] == ["emails", "reports"]


def test_several_cycles_and_page_size(queues: None) -> None:
    get_ledger().admit_many([(f"d{n}", BIG) for n in range(300)])
    out, _ = run("default", "--count", "10", "--max-cycles", "3", "--interval", "0")
    found = cycles(out)
    assert [cycle for cycle, _, _ in found] == [1, 2, 3]
    assert all(counts["scanned"] >= 300 for _, _, counts in found)


def test_bad_options(queues: None) -> None:
    with pytest.raises(
        CommandError, match=r"unknown ledger queue 'sms'.*'default', 'emails', 'reports'"
    ):
        run("sms")
    for args in (
        ["--count", "0"],
        ["--count", "10001"],
        ["--interval", "-1"],
        ["--max-cycles", "0"],
    ):
        with pytest.raises(CommandError):
            run(*args)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_progress_bar_on_a_terminal_plain_lines_otherwise(queues: None) -> None:
    get_ledger().admit_many([(f"d{n}", BIG) for n in range(300)])
    out, _ = run("default", "--count", "50", stdout=Terminal())
    assert out.count("\rdefault [") > 1, "the bar moves page by page"
    assert "] 300/300 records" in out
    assert cycles(out)[0][2]["scanned"] == 300
    plain, _ = run("default", "--count", "10")
    assert "\r" not in plain and "[" not in plain
    assert plain.splitlines() == [plain.strip()]


def test_errors_give_a_non_zero_exit(fresh_redis: RedisServer, namespace: str) -> None:
    with override_settings(LEDGER=config(fresh_redis.url, namespace)):
        get_ledger().admit("a", "x")
        fresh_redis.kill()
        out, err = io.StringIO(), io.StringIO()
        with pytest.raises(CommandError, match="repair failed 3 time"):
            call_command("ledger_repair", stdout=out, stderr=err)
    reset_connections()
    assert err.getvalue().count("ERROR: Redis is unavailable") == 3


def test_sigint_stops_after_the_page_in_hand(queues: None, monkeypatch: pytest.MonkeyPatch) -> None:
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when the suite runs in the background
    get_ledger().admit_many([(f"d{n}", BIG) for n in range(300)])
    pages: list[str] = []
    original = Ledger.repair_page

    def page_then_interrupt(self: Ledger, cursor: str | int = "0", count: int = 100) -> Any:
        report = original(self, cursor, count)
        pages.append(report.cursor)
        os.kill(os.getpid(), signal.SIGINT)  # as if Ctrl-C came during this page
        return report

    monkeypatch.setattr(Ledger, "repair_page", page_then_interrupt)
    out, _ = run("--count", "10", "--loop", "--interval", "0")
    assert len(pages) == 1, "the page in hand is finished, no other is started"
    assert "cycle 1 queue default:" in out and "(stopped after 1 page(s))" in out
    assert "queue emails" not in out
    assert "stopped on signal" in out
    assert signal.getsignal(signal.SIGINT) is before, "the command gives back the handler it found"


def test_sigterm_stops_a_loop_cleanly(redis_server: RedisServer, namespace: str) -> None:
    env = {**os.environ, "REDIS_URL": redis_server.url, "LEDGER_NAMESPACE": namespace}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "ledger_repair", "--loop", "--interval", "0.05"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("cycle 1 queue default:"), first + process.stderr.read()  # type: ignore[union-attr]
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert out.rstrip().endswith("stopped on signal, after the page in hand")
