"""Fixtures of the bulk tests: the worker settings' failing queue, and a worker serving it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_ledger.conf import get_ledger
from django_ledger.core import State
from django_ledger.core.ledger import Ledger
from tests.support.bulk_worker_settings import LEDGER as WORKER_LEDGER
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until

#: The queue the bulk tests fill: each attempt fails, and the first ends it DEAD.
QUEUE = "dying"
SETTINGS = "tests.support.bulk_worker_settings"


@pytest.fixture
def bulk_ledger(namespace: str, settings: Any) -> Ledger:
    """The dying queue of the bulk worker settings, in this test's namespace."""
    queues = {**settings.LEDGER["QUEUES"], QUEUE: WORKER_LEDGER["QUEUES"][QUEUE]}
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace, "QUEUES": queues}
    ledger = get_ledger(QUEUE)
    assert isinstance(ledger, Ledger)
    return ledger


@pytest.fixture
def dying_worker(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> Iterator[WorkerProcess]:
    """A ``ledger_worker`` process serving the dying queue, once it has beaten."""
    worker = WorkerProcess(
        redis_server.url, namespace, [QUEUE], tmp_path / "worker.log", settings=SETTINGS
    )
    try:
        wait_until(
            lambda: redis_client.zcard(f"{namespace}:workers") or worker.process.poll() is not None,
            timeout=60,
            what="the worker's first heartbeat",
        )
        assert worker.process.poll() is None, worker.output()
        yield worker
    finally:
        worker.stop()


def runs(client: redis.Redis, namespace: str) -> dict[str, int]:
    """How many times the worker ran each record (``worker_handlers._note``)."""
    return {k.decode(): int(v) for k, v in client.hgetall(f"{namespace}:runs").items()}


def assert_each_retried_once(
    ledger: Ledger,
    ids: list[str],
    run: Any,
    done: int,
    skipped: int,
    ran_meanwhile: dict[str, int],
    namespace: str,
) -> None:
    """What the 50,000 test checks, from the admin and from the command alike."""
    assert (done, skipped, run.matched, run.done) == (50_000, 0, 50_000, 50_000)
    # The worker took records while the run went on and ended each FAILED at once, in a
    # state the filter matches: none of those was matched again (a second retry would run
    # a record twice).
    assert ran_meanwhile, "the worker ran nothing while the run went on"
    ran = runs(ledger.redis, namespace)
    assert set(ran.values()) == {1}
    # What Redis holds: no record is as it was before the run (DEAD, three attempts);
    # each changed once, after the run started: the count reported is that number.
    stored = ledger.resolve_many(ids)
    assert all(r is not None and r.updated_at >= run.started[0] for r in stored)
    assert not [r for r in stored if r and r.attempts == 3]
    failed_again = {r.request_id for r in stored if r and r.state is State.FAILED}
    assert failed_again and failed_again <= set(ran)
