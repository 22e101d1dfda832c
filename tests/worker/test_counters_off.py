"""Counters off (``LEDGER['COUNTERS'] = False`` or ``--no-counters``): no key written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from django_ledger import Ledger
from django_ledger.checks import check_settings
from django_ledger.core.counters import Counters
from django_ledger.services.worker import WorkerOptions, build_worker
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess


def _counter_keys(client: redis.Redis, namespace: str) -> list[Any]:
    return [key for key in client.scan_iter(match="*:counts*") if namespace.encode() in key]


def test_a_worker_with_no_counters_writes_no_counters_key(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    raw, failing = (
        Ledger(redis_client, namespace, "raw"),
        Ledger(redis_client, namespace, "failing"),
    )
    for n in range(20):
        raw.admit(f"ok-{n}", "work")
    failing.admit("bad", "work")  # its first attempt fails: a retry outcome
    worker = WorkerProcess(
        redis_server.url,
        namespace,
        ["raw", "failing", "--burst", "--no-counters"],
        tmp_path / "w.log",
    )
    try:
        assert worker.wait() == 0, worker.output()
    finally:
        worker.stop()
    bad = failing.resolve("bad")
    assert raw.stats().completed == 20 and bad is not None and bad.attempts >= 1
    assert _counter_keys(redis_client, namespace) == []
    assert Counters(redis_client, namespace).read("raw").total.runs == 0
    # The same run with counters on does write them (the scan above can see them).
    raw.admit("counted", "work")
    worker = WorkerProcess(redis_server.url, namespace, ["raw", "--burst"], tmp_path / "b.log")
    try:
        assert worker.wait() == 0, worker.output()
    finally:
        worker.stop()
    assert _counter_keys(redis_client, namespace) != []
    assert Counters(redis_client, namespace).read("raw").total.counts["completed"] == 1


@pytest.mark.django_db
def test_the_counters_setting_turns_the_tally_off(settings: Any, namespace: str) -> None:
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace}
    on = build_worker(WorkerOptions(queues=["default"]))
    assert on.config.heartbeats is not None and on.config.heartbeats.tally.enabled
    settings.LEDGER = {**settings.LEDGER, "COUNTERS": False}
    off = build_worker(WorkerOptions(queues=["default"]))
    assert off.config.heartbeats is not None and not off.config.heartbeats.tally.enabled
    off.config.heartbeats.tally.add("default", "t", "completed", run_s=1)
    assert off.config.heartbeats.tally.take() == {}
    assert check_settings() == []


def test_a_counters_setting_not_a_bool_is_a_check_error(settings: Any) -> None:
    settings.LEDGER = {**settings.LEDGER, "COUNTERS": "no"}
    assert [m.id for m in check_settings()] == ["django_ledger.E007"]
    with pytest.raises(ValueError, match=r"COUNTERS.*True or False"):
        build_worker(WorkerOptions(queues=["default"]))
