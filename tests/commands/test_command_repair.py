"""``manage.py ledger_repair``: cycles over queues, counts per cycle, clean stops, errors."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_ledger import State
from django_ledger.conf import get_ledger, reset_connections
from django_ledger.core.ledger import Ledger
from tests.support.cluster_server import redis_cluster, slot_owner
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
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


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` until it holds; fail, saying ``what`` did not happen, at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s"
        time.sleep(0.01)


def test_one_queues_redis_fails_and_the_others_are_repaired() -> None:
    # Three masters: with two, the live one loses its majority after the node timeout and
    # answers CLUSTERDOWN too (Redis's rule, whichever client).
    with redis_cluster(3) as nodes:
        # A namespace whose queues default and reports live on one node, emails on the other.
        while True:
            namespace = f"t{uuid.uuid4().hex[:12]}"
            owners = {
                q: slot_owner(nodes, f"{{{namespace}:{q}}}")
                for q in ("default", "emails", "reports")
            }
            if owners["default"] is owners["reports"] is not owners["emails"]:
                break
        settings = {
            **config("unused", namespace),
            "CONNECTION": {"CLUSTER": [f"127.0.0.1:{node.port}" for node in nodes]},
            "TIMEOUTS": {"CONNECT": 1, "SOCKET": 5},
        }
        with override_settings(LEDGER=settings):
            for queue in ("default", "emails", "reports"):
                ledger = get_ledger(queue)
                ledger.admit_many([(f"{queue}-{n}", "x") for n in range(3)])
                ledger.redis.zrem(ledger.ready_key, f"{queue}-0")  # a lost index entry
            owners["emails"].kill()
            out, err = io.StringIO(), io.StringIO()
            with pytest.raises(CommandError, match=r"repair failed 2 time\(s\)"):
                call_command(
                    "ledger_repair", "--max-cycles", "2", "--interval", "0", stdout=out, stderr=err
                )
            repaired = cycles(out.getvalue())
            assert [(cycle, queue) for cycle, queue, _ in repaired] == [
                (1, "default"), (1, "reports"), (2, "default"), (2, "reports"),
            ]  # fmt: skip
            assert [counts["reindexed"] for _, _, counts in repaired] == [1, 1, 0, 0]
            failed = err.getvalue().splitlines()
            assert [line.split(":")[0] for line in failed] == [
                "cycle 1 queue emails", "cycle 2 queue emails",
            ]  # fmt: skip
            assert all("ERROR: Redis is unavailable" in line for line in failed), failed
            for queue in ("default", "reports"):
                ledger = get_ledger(queue)
                assert ledger.redis.zscore(ledger.ready_key, f"{queue}-0") is not None
        reset_connections()


class StallingProxy:
    """A TCP path to a Redis that can stop delivering, as a network that drops packets.

    Bytes pass both ways until ``stall()``; from then on nothing passes, and ``held`` is
    set as soon as a request or a reply is held back: a call is then waiting for a reply
    that cannot come.
    """

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.held = threading.Event()
        self._stalled = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        self._stalled.set()

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self._sockets += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if self._stalled.is_set():
                self.held.set()
                continue  # dropped: neither the request nor its reply arrives
            try:
                target.sendall(data)
            except OSError:
                return


@pytest.mark.standalone_only(reason="a TCP proxy in front of one server's port")
def test_a_second_ctrl_c_stops_at_once(
    redis_server: RedisServer, namespace: str, tmp_path: Path
) -> None:
    with override_settings(LEDGER=config(redis_server.url, namespace)):
        get_ledger().admit_many([(f"d{n}", BIG) for n in range(300)])
    reset_connections()
    proxy = StallingProxy(redis_server.port)
    env = {
        **os.environ,
        "REDIS_URL": f"redis://127.0.0.1:{proxy.port}/0",
        "LEDGER_NAMESPACE": namespace,
        "PYTHONUNBUFFERED": "1",
    }
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "ledger_repair", "--loop", "--interval", "0", "--count", "10"],
            cwd=ROOT, env=env, stdout=stdout, stderr=stderr,
        )  # fmt: skip
    try:
        wait_until(
            lambda: "cycle 1 queue" in out.read_text() or process.poll() is not None,
            "no cycle ended",
        )
        assert process.poll() is None, err.read_text()
        # The network stops delivering: the page in hand waits for a reply that cannot come.
        proxy.stall()
        assert proxy.held.wait(60), "the command sent nothing more"
        process.send_signal(signal.SIGINT)  # the first Ctrl-C: stop after the page in hand
        # The second stops it at once, though the page in hand never finished. (Sent again
        # until the command is gone, in case two signals close together count as one.)
        deadline = time.monotonic() + 60
        while process.poll() is None:
            assert time.monotonic() < deadline, "a second Ctrl-C did not stop the command"
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.5)
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        proxy.close()
    errors = err.read_text()
    assert process.returncode == -signal.SIGINT, (process.returncode, errors)
    assert "KeyboardInterrupt" in errors
    assert not re.search(r"queue \S+: .* ERROR:", errors), errors  # no time-out ended the page
    assert "stopped on signal" not in out.read_text()
