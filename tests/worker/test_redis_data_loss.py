"""Redis restarted without persistence: the workers notice, say so, and fences go on.

A real ``ledger_worker`` serves a redis-server of the test's own that persists nothing;
the server is killed and started again, empty. The worker logs the loss as an ERROR,
counts it in its heartbeat and its metrics, ``check --deploy`` warns of it (W005), the
Workers page shows it, and a task re-sent after the loss gets a fence above the one its
first run had, so effects stored downstream with the old fence do not refuse it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from django_ledger import Ledger, State
from django_ledger.checks import check_redis
from django_ledger.conf import reset_connections
from django_ledger.core.worker.epoch import DataLoss, Epochs, EpochWatch
from django_ledger.core.worker.heartbeat import Heartbeats
from tests.support.redis_server import RedisServer, free_port
from tests.support.worker_process import WorkerProcess, wait_until
from tests.worker.test_worker_metrics import scrape

MEMORY = "django_ledger.core.dispatch.MemoryDispatchRegistry"
LOSSES = ("ledger_redis_data_losses_total", frozenset())


@pytest.fixture
def forgetful_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own that persists nothing (no AOF, no RDB)."""
    server = RedisServer(appendonly=False)
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


def _completed(ledger: Ledger, request_id: str) -> bool:
    record = ledger.resolve(request_id)
    return record is not None and record.state is State.COMPLETED


@pytest.mark.django_db
def test_a_restart_without_persistence_is_noticed_and_fences_keep_growing(
    forgetful_redis: RedisServer,
    tmp_path: Path,
    admin_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REDIS_CLUSTER", raising=False)  # the worker serves this server alone
    namespace = f"t{uuid.uuid4().hex[:16]}"
    client = forgetful_redis.client()
    ledger = Ledger(client, namespace, "filewait")  # 1 s leases: a beat every third of it
    go = tmp_path / "go"
    go.touch()
    ledger.admit("order-1", str(go))
    port = free_port()
    worker = WorkerProcess(
        forgetful_redis.url,
        namespace,
        ["filewait", "--metrics-port", str(port)],
        tmp_path / "worker.log",
    )
    try:
        wait_until(lambda: _completed(ledger, "order-1"), what="the first run")
        first = ledger.resolve("order-1")
        assert first is not None
        epochs = Epochs(client, namespace)
        wait_until(epochs.read, what="the worker to begin an epoch")
        assert scrape(port).get(LOSSES) == 0

        forgetful_redis.kill()  # nothing flushed, nothing persisted
        forgetful_redis.restart()
        # The record went with the data (the worker, still running, may write its own keys
        # again at once: its heartbeat).
        assert ledger.resolve("order-1") is None

        wait_until(
            lambda: "Redis lost the ledger's data" in worker.output(), what="the worker's notice"
        )
        assert "ERROR" in next(
            line for line in worker.output().splitlines() if "lost the ledger's data" in line
        )
        epoch = epochs.read()
        assert epoch is not None and epoch.after_loss is not None
        wait_until(lambda: scrape(port).get(LOSSES) == 1, what="the metric")
        beats = Heartbeats(client, namespace)
        wait_until(lambda: [b.data_losses for b in beats.live()] == [1], what="the heartbeat")

        # The same task, re-sent after the loss: a fence above its first run's.
        assert ledger.admit("order-1", str(go)).accepted
        wait_until(lambda: _completed(ledger, "order-1"), what="the re-sent run")
        again = ledger.resolve("order-1")
        assert again is not None and again.fence > first.fence

        ledger_setting = {
            "CONNECTION": forgetful_redis.url,
            "NAMESPACE": namespace,
            "DISPATCH": {"BACKEND": MEMORY},
        }
        with override_settings(LEDGER=ledger_setting):
            reset_connections()
            try:
                warned = [m for m in check_redis() if m.id == "django_ledger.W005"]
                page = admin_client.get("/admin/django_ledger/worker/").content.decode()
            finally:
                reset_connections()
        assert len(warned) == 1 and epoch.after_loss.noticed_by in warned[0].msg
        assert 'id="data-loss"' in page and "Redis lost the ledger" in page
    finally:
        worker.signal(15)
        assert worker.wait() == 0, worker.output()
        client.close()


def test_two_workers_that_notice_one_loss_begin_one_epoch(
    redis_client: Any, namespace: str
) -> None:
    epochs = Epochs(redis_client, namespace)
    first, second = EpochWatch(epochs), EpochWatch(epochs)
    assert first.seen(redis_client.get(epochs.key), 1_000, "w-1") is None  # begins one
    assert second.seen(redis_client.get(epochs.key), 1_001, "w-2") is None  # reads it
    began = epochs.read()
    assert began is not None and began.after_loss is None

    redis_client.delete(epochs.key)  # what a restart without persistence leaves
    seen = [first.seen(None, 2_000, "w-1"), second.seen(None, 2_001, "w-2")]
    after = epochs.read()
    assert after is not None and after.id != began.id
    assert after.after_loss == DataLoss(began.id, 2_000, "w-1")
    assert seen == [after.after_loss, after.after_loss]
    assert (first.losses, second.losses) == (1, 1)
    # Later beats find the new epoch: nothing more to tell.
    assert first.seen(redis_client.get(epochs.key), 3_000, "w-1") is None
    assert second.seen(redis_client.get(epochs.key), 3_001, "w-2") is None

    # A document that is not an epoch (written by hand) is no loss, beat after beat.
    redis_client.set(epochs.key, b"\xff not json")
    assert first.seen(redis_client.get(epochs.key), 4_000, "w-1") is None
    assert first.seen(redis_client.get(epochs.key), 5_000, "w-1") is None
    assert first.losses == 1
