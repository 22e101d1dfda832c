"""Progress and metadata of a running task (core/progress.py, progress.lua): fenced, coalesced.

A write lands only while the record is CLAIMED under the writer's fence: a stale run's
report is refused; reports are noted in memory and written at most once per interval;
what was stored goes with the record when it is purged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from django_ledger import Ledger, State
from django_ledger.core.errors import FusedPathOnly
from django_ledger.core.progress import (
    MAX_METADATA_BYTES,
    MAX_NOTE_CHARS,
    ProgressBoard,
    ProgressPad,
    read_progress,
)
from tests.support.ledger_helpers import expire_and_repair

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.fixture
def optimized() -> bool:
    """The fused path: progress is an extra of the job system."""
    return True


def _pad(ledger: Ledger, request_id: str, fence: int) -> ProgressPad:
    return ProgressPad(ledger, request_id, fence, interval=1.0)


def test_a_report_is_stored_with_the_claims_fence_and_read_back(ledger: Ledger) -> None:
    ledger.admit("job", "{}")
    claim = ledger.claim("w")
    assert claim is not None
    pad = _pad(ledger, "job", claim.fence)
    pad.set_progress(3, 10, note="three of ten")
    pad.set_metadata({"rows": 3, "file": "été.csv"})
    assert pad.flush()
    (stored,) = read_progress(ledger, ["job"])
    assert stored is not None
    assert (stored.done, stored.total, stored.note) == (3, 10, "three of ten")
    assert stored.metadata == {"rows": 3, "file": "été.csv"}
    assert stored.fence == claim.fence and stored.percent == 30
    assert not pad.flush()  # nothing new: nothing sent


def test_a_stale_runs_write_is_refused_and_leaves_the_newer_report(ledger: Ledger) -> None:
    ledger.admit("job", "{}")
    old = ledger.claim("w1", lease=timedelta(seconds=1))
    assert old is not None
    expire_and_repair(ledger, 2_000)  # the first run's lease ran out: the record is due again
    new = ledger.claim("w2")
    assert new is not None and new.fence > old.fence
    fresh = _pad(ledger, "job", new.fence)
    fresh.set_progress(1, 2, "new run")
    fresh.flush()
    stale = _pad(ledger, "job", old.fence)
    stale.set_progress(2, 2, "old run")
    stale.flush()
    assert stale.refused == "superseded"
    (stored,) = read_progress(ledger, ["job"])
    assert stored is not None and stored.note == "new run" and stored.fence == new.fence
    stale.set_progress(2, 2, "again")  # a refused pad sends nothing more
    assert not stale.flush()


def test_a_write_after_the_settlement_is_refused(ledger: Ledger) -> None:
    ledger.admit("job", "{}")
    claim = ledger.claim("w")
    assert claim is not None
    ledger.settle(claim, State.COMPLETED)
    pad = _pad(ledger, "job", claim.fence)
    pad.set_progress(5)
    pad.flush()
    assert pad.refused == "not_claimed"
    assert read_progress(ledger, ["job"]) == [None]


def test_the_board_writes_each_task_at_most_once_per_interval(ledger: Ledger) -> None:
    ledger.admit_many([(f"j{i}", "{}") for i in range(3)])
    claims = ledger.claim_many("w", 3)
    board = ProgressBoard(interval=1.0)
    pads = [board.pad(ledger, c.request_id, c.fence) for c in claims]
    for step in range(1000):
        for pad in pads:
            pad.set_progress(step, 1000)
    assert board.flush_due(now=100.0) == 3  # one call for the three
    for pad in pads:
        pad.set_progress(1000, 1000, "done")
    assert board.flush_due(now=100.5) == 0  # within the interval: kept in memory
    assert board.flush_due(now=101.0) == 3
    stored = read_progress(ledger, [c.request_id for c in claims])
    assert [p.done if p else None for p in stored] == [1000, 1000, 1000]
    assert all(pad.writes == 2 for pad in pads)


def test_purging_the_record_removes_its_progress(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(retention=timedelta(seconds=1))
    ledger.admit("job", "{}")
    claim = ledger.claim("w")
    assert claim is not None
    pad = _pad(ledger, "job", claim.fence)
    pad.set_progress(1, 1)
    pad.flush()
    ledger.settle(claim, State.COMPLETED)
    assert ledger.redis.hexists(ledger.runner.keys.progress, "job")
    expire_and_repair(ledger, 5_000)  # past retention: purged
    assert ledger.resolve("job") is None
    assert not ledger.redis.exists(ledger.runner.keys.progress)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda p: p.set_progress(-1), ValueError),
        (lambda p: p.set_progress(float("nan")), ValueError),
        (lambda p: p.set_progress(True), TypeError),
        (lambda p: p.set_progress(1, "10"), TypeError),
        (lambda p: p.set_progress(1, note="x" * (MAX_NOTE_CHARS + 1)), ValueError),
        (lambda p: p.set_progress(1, note="\ud800"), ValueError),
        (lambda p: p.set_metadata({"blob": "x" * MAX_METADATA_BYTES}), ValueError),
        (lambda p: p.set_metadata({1: "int key"}), TypeError),
        (lambda p: p.set_metadata({"when": object()}), TypeError),
        (lambda p: p.set_metadata([1, 2]), TypeError),
        (lambda p: p.set_metadata({"deep": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}), ValueError),
        (lambda p: p.set_metadata({"ratio": float("inf")}), ValueError),
    ],
)
def test_bad_reports_raise_and_nothing_is_noted(
    ledger: Ledger, call: Callable[[ProgressPad], None], error: type[Exception]
) -> None:
    ledger.admit("job", "{}")
    claim = ledger.claim("w")
    assert claim is not None
    pad = _pad(ledger, "job", claim.fence)
    pad.set_progress(1, 2, "good")
    pad.set_metadata({"ok": True})
    with pytest.raises(error):
        call(pad)
    pad.flush()
    (stored,) = read_progress(ledger, ["job"])
    assert stored is not None and stored.note == "good" and stored.metadata == {"ok": True}


def test_a_reference_ledger_refuses_progress(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(optimized=False)
    ledger.admit("job", "{}")
    claim = ledger.claim("w")
    assert claim is not None
    with pytest.raises(FusedPathOnly):
        _pad(ledger, "job", claim.fence).set_progress(1)


def test_a_report_redis_did_not_take_is_sent_again(
    ledger: Ledger, ledger_factory: Callable[..., Ledger]
) -> None:
    import redis as redis_py
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from django_ledger.core.errors import LedgerUnavailable
    from tests.support.redis_server import free_port

    client = redis_py.Redis(
        port=free_port(), socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
    )
    away = ledger_factory(client=client)
    pad = ProgressPad(away, "job", 7, interval=1.0)
    pad.set_progress(3, 4, "kept")
    with pytest.raises(LedgerUnavailable):
        pad.flush()
    item = pad.take()  # still noted: the next chance sends it
    assert item is not None and item[:2] == ("job", 7) and '"note":"kept"' in item[2]


def test_the_beat_never_writes_a_pad_while_its_attempt_writes_its_last_value(
    ledger: Ledger,
) -> None:
    ledger.admit("job", "{}")
    claim = ledger.claim("w")
    assert claim is not None
    board = ProgressBoard(interval=1.0)
    pad = board.pad(ledger, "job", claim.fence)
    pad.set_progress(1, 2, "older")
    with pad.sending:  # the attempt's own last write is under way
        assert board.flush_due(now=50.0) == 0
    assert board.flush_due(now=50.0) == 1
    (stored,) = read_progress(ledger, ["job"])
    assert stored is not None and stored.note == "older"


def test_brackets_inside_metadata_strings_are_text(ledger: Ledger) -> None:
    ledger.admit("job", "{}")
    claim = ledger.claim("w")
    assert claim is not None
    pad = _pad(ledger, "job", claim.fence)
    pad.set_metadata({"pattern": "[" * 40 + "{" * 40})
    pad.flush()
    (stored,) = read_progress(ledger, ["job"])
    assert stored is not None and stored.metadata == {"pattern": "[" * 40 + "{" * 40}


def test_a_sharded_queue_writes_each_report_in_its_records_shard(
    redis_client: Any, namespace: str
) -> None:
    from django_ledger.core.sharded import ShardedLedger

    sharded = ShardedLedger(redis_client, namespace, "q", 3, optimized=True)
    ids = [f"job-{i}" for i in range(6)]
    sharded.admit_many([(i, "{}") for i in ids])
    claims = sharded.claim_many("w", 6)
    assert len(claims) == 6
    board = ProgressBoard(interval=1.0)
    for claim in claims:
        board.pad(sharded, claim.request_id, claim.fence).set_progress(1, 1, claim.request_id)
    assert board.flush_due(now=10.0) == 6  # one call per shard
    stored = read_progress(sharded, ids)
    assert [p.note if p else None for p in stored] == ids
