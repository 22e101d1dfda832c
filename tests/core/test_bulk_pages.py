"""Bulk pages in the core (``core/bulk.py``): read a page of matches, act by compare-and-set.

Every match across pages is acted on once, ties of one end time included; a record that
moved on between the read and the act is skipped and counted; a record updated after the
run started is never matched; a stepper whose hold was taken writes nothing; a task
filter reads the payload's task in Redis; the reference path refuses.
"""

from __future__ import annotations

import pytest
import redis

from django_ledger.core import State, bulk
from django_ledger.core.errors import FusedPathOnly
from django_ledger.core.ledger import Ledger
from tests.support.bulk_helpers import import_ended, task_payload

RUN = "a" * 32


@pytest.fixture
def fused(redis_client: redis.Redis, namespace: str) -> Ledger:
    return Ledger(redis_client, namespace, "bulk", optimized=True)


def held(ledger: Ledger, token: str = "t") -> None:
    ledger.redis.hset(bulk.run_key(ledger, RUN), mapping={"token": token, "seg": 0})


def run_all(
    ledger: Ledger, segment: bulk.Segment, action: str, started: int, limit: int, task: str = ""
) -> tuple[int, int, int]:
    """Step pages until the segment ends: (done, skipped, pages)."""
    done = skipped = pages = 0
    while True:
        page = bulk.read_page(ledger, RUN, "t", segment, limit=limit, started=started, task=task)
        after = bulk.Position(0, page.score, page.last) if page.more else bulk.Position(1)
        d, s = bulk.act_page(ledger, RUN, "t", action, after, page.matches)
        done, skipped, pages = done + d, skipped + s, pages + 1
        if not page.more:
            return done, skipped, pages


def test_each_match_is_retried_once_across_pages_and_ties(fused: Ledger) -> None:
    now = fused.server_time_ms()
    # 1,050 records, 100 per end time: pages of 64 end inside groups of ties.
    ids = import_ended(fused, 1050, ended_at=now - 10_000)
    held(fused)
    started = fused.server_time_ms() + 1
    done, skipped, pages = run_all(fused, bulk.Segment(State.DEAD), "retry", started, 64)
    assert (done, skipped, pages) == (1050, 0, 17)
    records = fused.resolve_many(ids)
    assert {r.state for r in records if r} == {State.PENDING}
    assert {r.attempts for r in records if r} == {0}
    assert fused.stats().dead == 0
    counts = fused.redis.hmget(bulk.run_key(fused, RUN), "done", "skipped", "seg")
    assert counts == [b"1050", b"0", b"1"]  # the counts moved with the writes


def test_a_record_that_moved_on_between_read_and_act_is_skipped_and_counted(
    fused: Ledger,
) -> None:
    for i in range(5):
        fused.admit(f"p{i}", "x")
    held(fused)
    started = fused.server_time_ms() + 1
    page = bulk.read_page(fused, RUN, "t", bulk.Segment(State.PENDING), limit=10, started=started)
    assert len(page.matches) == 5
    claim = fused.claim("worker-1", 30)  # a worker takes one between the read and the act
    assert claim is not None
    done, skipped = bulk.act_page(fused, RUN, "t", "fail", bulk.Position(1), page.matches)
    assert (done, skipped) == (4, 1)
    assert fused.resolve(claim.request_id).state is State.CLAIMED  # type: ignore[union-attr]
    assert fused.stats().failed == 4


def test_records_updated_after_the_run_started_are_not_matched(fused: Ledger) -> None:
    now = fused.server_time_ms()
    import_ended(fused, 3, state=State.FAILED, ended_at=now - 10_000, ties=1)
    started = fused.server_time_ms() + 1
    fused.clock_skew_ms = 5  # a settlement after the run started
    fused.admit("late", "x")
    claim = fused.claim("worker-1", 30)
    assert claim is not None
    fused.settle(claim, State.FAILED)
    fused.clock_skew_ms = 0
    held(fused)
    page = bulk.read_page(fused, RUN, "t", bulk.Segment(State.FAILED), limit=10, started=started)
    assert page.looked == 4
    assert [request_id for request_id, _ in page.matches] == ["r000000", "r000001", "r000002"]


def test_a_stepper_whose_hold_was_taken_writes_nothing(fused: Ledger) -> None:
    now = fused.server_time_ms()
    import_ended(fused, 3, ended_at=now - 10_000)
    held(fused, "old")
    started = fused.server_time_ms() + 1
    page = bulk.read_page(fused, RUN, "old", bulk.Segment(State.DEAD), limit=10, started=started)
    held(fused, "new")  # another stepper took the run over
    with pytest.raises(bulk.RunLost):
        bulk.act_page(fused, RUN, "old", "retry", bulk.Position(1), page.matches)
    assert fused.stats().dead == 3
    # A cancel page moves the run on by itself: that move is refused the same way.
    with pytest.raises(bulk.RunLost):
        bulk.move(fused, RUN, "old", bulk.Position(1), done=3)
    run = fused.redis.hgetall(bulk.run_key(fused, RUN))
    assert run[b"seg"] == b"0" and b"done" not in run


def test_purge_deletes_and_a_task_filter_reads_the_payloads_task(fused: Ledger) -> None:
    now = fused.server_time_ms()
    mine = task_payload("app.tasks.mine")
    import_ended(fused, 30, state=State.COMPLETED, ended_at=now - 10_000, payload=mine)
    import_ended(fused, 20, state=State.COMPLETED, ended_at=now - 10_000, prefix="o")
    started = fused.server_time_ms() + 1
    segment = bulk.Segment(State.COMPLETED, None, now)
    assert bulk.count_matches(fused, segment, started=started, task="app.tasks.mine", limit=7) == 30
    assert bulk.count_matches(fused, segment, started=started) == 50
    held(fused)
    done, skipped, _ = run_all(fused, segment, "purge", started, 16, task="app.tasks.mine")
    assert (done, skipped) == (30, 0)
    assert fused.resolve("r000000") is None
    assert fused.stats().completed == 20


def test_a_time_range_bounds_the_pages(fused: Ledger) -> None:
    now = fused.server_time_ms()
    import_ended(fused, 10, ended_at=now - 10_000, ties=1)  # ended at now-10000 .. now-9991
    held(fused)
    started = fused.server_time_ms() + 1
    segment = bulk.Segment(State.DEAD, now - 9_998, now - 9_995)
    assert bulk.count_matches(fused, segment, started=started) == 4
    done, _, _ = run_all(fused, segment, "retry", started, 3)
    assert done == 4
    assert fused.resolve("r000001").state is State.DEAD  # type: ignore[union-attr]
    assert fused.resolve("r000002").state is State.PENDING  # type: ignore[union-attr]


def test_the_reference_path_refuses(redis_client: redis.Redis, namespace: str) -> None:
    ledger = Ledger(redis_client, namespace, "bulk", optimized=False)
    with pytest.raises(FusedPathOnly):
        bulk.read_page(ledger, RUN, "t", bulk.Segment(State.DEAD), limit=10, started=0)
