"""``manage.py ledger_records ACTION``: a bulk action over a filter, from the command line.

Fifty thousand DEAD records retried while a real worker fails them again: each is retried
once (never a record the worker ended after the run began), and the count printed is what
Redis holds. A run killed mid-way resumes and finishes without acting twice; bad filters
are refused before anything is written; a terminal gets a progress bar.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from django_ledger.conf import get_ledger
from django_ledger.core import State
from django_ledger.core.ledger import Ledger
from django_ledger.services.bulk import load_run
from tests.support.bulk_fixtures import QUEUE, SETTINGS, assert_each_retried_once, runs
from tests.support.bulk_helpers import import_ended
from tests.support.redis_server import RedisServer
from tests.support.worker_process import ROOT, WorkerProcess, wait_until

pytest_plugins = ["tests.support.bulk_fixtures"]
pytestmark = pytest.mark.django_db

DONE = re.compile(r"retry: (\d+) done, (\d+) skipped")


def records(*args: str, stdout: Any = None) -> str:
    out = stdout or io.StringIO()
    call_command("ledger_records", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_a_bulk_retry_of_50000_dead_records_with_a_worker_running(
    bulk_ledger: Ledger,
    dying_worker: WorkerProcess,
    redis_client: redis.Redis,
    namespace: str,
) -> None:
    now = bulk_ledger.server_time_ms()
    ids = import_ended(bulk_ledger, 50_000, ended_at=now - 120_000)
    # DEAD and FAILED: what the worker fails meanwhile lands in the state the run reads next.
    out = records(
        "retry", "--queue", QUEUE, "--state", "DEAD", "--state", "FAILED", "--page", "1000"
    )
    ran_meanwhile = runs(redis_client, namespace)
    # The worker has ended at least one retried record FAILED (one it is running may not have).
    wait_until(lambda: bulk_ledger.stats().failed, what="a record failed again")
    dying_worker.stop()
    done, skipped = map(int, DONE.search(out).groups())  # type: ignore[union-attr]
    run = load_run(QUEUE, re.search(r"run ([0-9a-f]{32})", out).group(1))  # type: ignore[union-attr]
    assert_each_retried_once(bulk_ledger, ids, run, done, skipped, ran_meanwhile, namespace)


def test_preview_counts_without_acting(bulk_ledger: Ledger) -> None:
    now = bulk_ledger.server_time_ms()
    import_ended(bulk_ledger, 30, state=State.FAILED, ended_at=now - 10_000, ties=1)
    after = f"{now - 10_000 + 10}"
    out = records(
        "purge", "--queue", QUEUE, "--state", "FAILED", "--ended-after", after, "--preview"
    )
    assert out.strip() == "20 records match"
    assert bulk_ledger.stats().failed == 30


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["retry", "--state", "PENDING"],
            "retry applies to DEAD/FAILED/COMPLETED records, not PENDING",
        ),
        (["retry", "--state", "LOST"], "'LOST' is not a record state"),
        (["retry", "--task", "no.such.task"], "no task 'no.such.task' is declared"),
        (["retry", "--ended-after", "yesterday"], "is not a time"),
        (
            ["retry", "--ended-after", "2026-01-02", "--ended-before", "2026-01-01"],
            "ends before it starts",
        ),
        (["retry", "--ended-after", "99999999999999999"], "out of range"),
        (["cancel", "--ended-after", "2026-01-01"], "a updated_at range selects"),
        (["retry", "--queue", "nowhere"], "no queue 'nowhere' is configured"),
        (["retry", "--resume", "f" * 32], "no bulk run"),
        (["retry", "--resume", "f" * 32, "--queue", "nowhere"], "unknown ledger queue 'nowhere'"),
    ],
)
def test_bad_filters_are_refused_before_anything_is_written(
    bulk_ledger: Ledger, args: list[str], message: str
) -> None:
    now = bulk_ledger.server_time_ms()
    import_ended(bulk_ledger, 3, ended_at=now - 10_000)
    if "--queue" not in args:
        args = [*args, "--queue", QUEUE]
    with pytest.raises(CommandError, match=re.escape(message)):
        records(*args)
    assert bulk_ledger.stats().dead == 3


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_progress_bar(bulk_ledger: Ledger) -> None:
    now = bulk_ledger.server_time_ms()
    import_ended(bulk_ledger, 25, ended_at=now - 10_000, ties=1)
    out = records("retry", "--queue", QUEUE, "--page", "10", stdout=Terminal())
    assert "\r[############..................] 10/25" in out
    assert "\r[##############################] 25/25" in out
    assert "retry: 25 done, 0 skipped" in out


def test_a_run_killed_mid_way_resumes_and_acts_on_each_record_once(
    bulk_ledger: Ledger, redis_server: RedisServer, namespace: str, tmp_path: Path
) -> None:
    now = bulk_ledger.server_time_ms()
    ids = import_ended(bulk_ledger, 1000, ended_at=now - 10_000, ties=7)
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "LEDGER_NAMESPACE": namespace,
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    log = tmp_path / "records.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "ledger_records",
                "retry",
                "--queue",
                QUEUE,
                "--page",
                "10",
            ],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(
                lambda: 1000 - bulk_ledger.stats().dead > 100 or process.poll() is not None,
                timeout=60,
                what="some pages",
            )
            assert process.poll() is None, log.read_text()
            process.send_signal(signal.SIGKILL)
            process.wait(10)
        finally:
            if process.poll() is None:
                process.kill()
    run_id = re.search(r"run ([0-9a-f]{32})", log.read_text()).group(1)  # type: ignore[union-attr]
    stopped = load_run(QUEUE, run_id)
    assert not stopped.finished and 0 < stopped.done < 1000
    # The dead stepper's hold has not run out: a resume says so, unless it takes over.
    with pytest.raises(CommandError, match="running elsewhere"):
        records("retry", "--queue", QUEUE, "--resume", run_id)
    out = records("retry", "--queue", QUEUE, "--resume", run_id, "--take-over")
    assert "retry: 1000 done, 0 skipped" in out
    stored = bulk_ledger.resolve_many(ids)
    assert {r.state for r in stored if r} == {State.PENDING}
    assert bulk_ledger.stats().pending_due == 1000


def test_a_sharded_queue_is_acted_on_shard_by_shard(namespace: str, settings: Any) -> None:
    queues = {**settings.LEDGER["QUEUES"], "sharded": {"SHARDS": 3}}
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace, "QUEUES": queues}
    ledger = get_ledger("sharded")
    ids = [f"job-{i}" for i in range(60)]
    for request_id in ids:
        ledger.admit(request_id, "{}")
    assert {len(ledger.shard_for(i).resolve_many([i])) for i in ids} == {1}
    assert len({id(ledger.shard_for(i)) for i in ids}) == 3  # the ids are spread
    out = records("fail", "--queue", "sharded", "--page", "7")
    assert "fail: 60 done, 0 skipped" in out
    out = records("retry", "--queue", "sharded", "--state", "FAILED", "--page", "7")
    assert "retry: 60 done, 0 skipped" in out
    assert {r.state for r in ledger.resolve_many(ids) if r} == {State.PENDING}
