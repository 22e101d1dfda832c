"""A schedule's ping URL hears each fire start and its task end, from a real worker.

One ``ledger_worker --scheduler`` process runs two schedules whose ``MONITOR`` is a URL
on an HTTP server of the test's own: a task that completes and one that fails after
its retries. Each run pings ``/start`` when its fire is admitted, then the bare URL
(completed) or ``/fail`` (failed, once, after the last attempt), both with the run's
``rid``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import redis

from django_ledger.core.schedule.monitor import run_id
from tests.support.redis_server import RedisServer, delete_namespace
from tests.support.worker_process import wait_until

ROOT = Path(__file__).resolve().parents[2]


class Pings:
    """An HTTP server on a free port that records every ping: (path, rid, body)."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        heard, lock = self.heard, self.lock

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode()
                parts = urlsplit(self.path)
                rid = parse_qs(parts.query).get("rid", [""])[0]
                with lock:
                    heard.append((parts.path, rid, body))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def of(self, check: str) -> list[tuple[str, str, str]]:
        with self.lock:
            return [(p, r, b) for p, r, b in self.heard if p.startswith(f"/{check}")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def pings() -> Iterator[Pings]:
    server = Pings()
    yield server
    server.close()


def first_run(heard: list[tuple[str, str, str]]) -> list[tuple[str, str, str]] | None:
    """The pings of the first run that has ended (start and end heard)."""
    for _, rid, body in heard:
        run = [ping for ping in heard if ping[1] == rid]
        if len(run) >= 2 and body.startswith("schedule:"):
            return run
    return None


def test_a_monitored_schedule_pings_start_then_success_or_fail_from_a_real_worker(
    pings: Pings, redis_server: RedisServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    namespace = f"t{uuid.uuid4().hex[:12]}"
    good, bad = f"good-{namespace}", f"bad-{namespace}"
    schedules = {
        good: {
            "TASK": "tests.support.tasks_app.tasks.noop",
            "EVERY": 1,
            "MONITOR": {"URL": f"{pings.url}/good"},
        },
        bad: {
            "TASK": "tests.support.tasks_app.tasks.always_fails",
            "EVERY": 1,
            "MONITOR": {"URL": f"{pings.url}/bad/"},  # a trailing slash is dropped
        },
    }
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
        "LEDGER_NAMESPACE": namespace,
        "LEDGER_SCHEDULES": json.dumps(schedules),
        "PYTHONPATH": str(ROOT),
    }
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "ledger_worker", "--scheduler", "--no-relay"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            ok = wait_until(lambda: first_run(pings.of("good")), 30, "a completed run's pings")
            failed = wait_until(lambda: first_run(pings.of("bad")), 30, "a failed run's pings")
        finally:
            worker.terminate()
            code = worker.wait(30)
    output = log.read_text(errors="replace")
    assert code == 0, output[-3000:]

    # Start, then success: one rid, the fire's, and the request id in the body.
    request_id = ok[0][2]
    rid = str(run_id(request_id))
    assert request_id.startswith(f"schedule:{good}:")
    assert ok == [("/good/start", rid, request_id), ("/good", rid, f"{request_id} completed")]
    # Start, then one fail after the task's three attempts (its retries ping nothing).
    request_id = failed[0][2]
    rid = str(run_id(request_id))
    assert failed == [("/bad/start", rid, request_id), ("/bad/fail", rid, f"{request_id} failed")]
    # Nothing of a ping URL reaches the log: not its path, not its port.
    assert "/good" not in output and str(pings.server.server_address[1]) not in output
    delete_namespace(redis_client, namespace)
