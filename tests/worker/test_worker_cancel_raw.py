"""A raw handler's run cancelled: ``job.cancel`` tells it within a second; its settlement is refused.

In-process, on the suite's Redis, with the core ``Worker`` (no Django): the handler
polls ``job.cancel`` and notes, on the server's clock, when it saw it. Also the race a
cancel can win: read from the stream before its claim is in hand, it is kept and told
once the claim is.
"""

from __future__ import annotations

import threading

import redis

from django_ledger import Ledger, State
from django_ledger.core.worker import Job
from django_ledger.core.worker.cancels import CancelListener
from django_ledger.core.worker.handler import CallableHandler, CancelNotice
from django_ledger.core.worker.runtime import Worker, WorkerConfig
from django_ledger.core.worker.state import Entry, WorkerState
from tests.support.worker_process import wait_until


def server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_a_raw_handler_sees_job_cancel_within_a_second(
    redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "raw-cancel")
    assert ledger.admit("r-1", "work").accepted
    started, seen = threading.Event(), []

    def handle(job: Job) -> str:
        started.set()
        pause = threading.Event()
        while job.cancel is None and not pause.wait(0.01):
            pass
        seen.append((server_ms(redis_client), job.cancel))
        return "finished anyway"

    worker = Worker(
        {"raw-cancel": ledger},
        {"raw-cancel": CallableHandler(handle, max_attempts=3)},
        {"raw-cancel": 30.0},
        WorkerConfig(worker_id="w-raw", concurrency=1, repair=False),
    )
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        assert started.wait(30)
        answer = ledger.cancel("r-1", by="ops", reason="stop it")
        assert answer.cancelled
        wait_until(lambda: seen, 10, "the handler saw its cancel")
        wait_until(lambda: worker.counts.lost == 1, 10, "its settlement refused")
    finally:
        worker.request_stop()
        runner.join(30)
    saw_at, notice = seen[0]
    assert notice is not None and (notice.by, notice.reason) == ("ops", "stop it")
    assert answer.record is not None
    assert notice.at == answer.record.updated_at
    assert 0 <= saw_at - notice.at < 1000
    record = ledger.resolve("r-1")
    assert record is not None and record.state is State.FAILED and record.fence == answer.fence
    assert worker.counts.processed == 0


def test_a_cancel_read_before_its_claim_is_in_hand_is_told_once_it_is(
    redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "raw-race")
    handler = CallableHandler(lambda job: None, max_attempts=1)
    state = WorkerState(
        {"raw-race": ledger}, {"raw-race": handler}, {"raw-race": 30.0}, WorkerConfig(), None
    )
    listener = CancelListener(state)
    ledger.admit("r-1", "x")
    claim = ledger.claim(state.worker_id, 30.0)
    assert claim is not None
    fields = {
        b"id": b"r-1",
        b"owner": state.worker_id.encode(),
        b"fence": str(claim.fence).encode(),
        b"by": b"ops",
        b"at": b"1",
        b"reason": b"",
    }
    listener._entry("raw-race", fields)  # not in hand yet: kept
    entry = Entry("raw-race", Job(claim, "raw-race", state.worker_id, 0), handler, 30.0)
    with state.lock:
        state.in_hand[("raw-race", "r-1", claim.fence)] = entry
    listener._match_kept()
    assert entry.job.cancel == CancelNotice("ops", 1, "")
    # Unstarted, it is dropped: it never starts.
    assert entry.finished and not state.in_hand
    # Another worker's cancel, or a bad entry, is skipped and not kept.
    listener._entry("raw-race", {**fields, b"owner": b"someone-else"})
    listener._entry("raw-race", {**fields, b"fence": b"not a number"})
    assert listener._unmatched == {}
