"""``unique`` until the start, until the end or for a period, and ``debounce``.

Each enqueue is one script call (``core/unique.py``); a worker's claim is the ledger's
own claim, and a run is ``tasks_helpers.run_claimed``. The server's clock is moved with
the ledger's test skew, never waited for.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import transaction

from django_ledger import Ledger
from django_ledger.core.records import State
from django_ledger.queues import queues
from django_ledger.tasks import LedgerTask, enqueue_many
from django_ledger.tasks.compat import InvalidTask, TaskResultStatus
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed

pytest_plugins = ["tests.support.tasks_fixtures"]


@pytest.fixture
def ledger(task_namespace: str) -> Iterator[object]:
    ledger = queues.get("default").ledger
    yield ledger
    ledger.clock_skew_ms = 0


def records(ledger: object) -> int:
    return ledger.stats().total  # type: ignore[attr-defined,no-any-return]


def test_until_start_answers_the_queued_run_then_admits_a_new_one_once_claimed(
    ledger: object,
) -> None:
    first = tasks.until_start.enqueue(1)
    again = tasks.until_start.enqueue(1)
    other = tasks.until_start.enqueue(2)
    assert again.id == first.id and again.status == TaskResultStatus.READY
    assert other.id != first.id
    assert records(ledger) == 2
    claimed = {ledger.claim("w").request_id for _ in range(2)}  # type: ignore[attr-defined]
    assert claimed == {first.id, other.id}
    later = tasks.until_start.enqueue(1)  # the first one started: a new run is queued
    assert later.id not in (first.id, other.id)
    assert tasks.until_start.enqueue(1).id == later.id
    assert records(ledger) == 3


def test_until_end_holds_through_the_run_and_releases_when_it_ends(ledger: object) -> None:
    first = tasks.until_end.enqueue(1)
    ran = run_claimed()  # runs and settles: COMPLETED
    assert ran is not None and ran[0].claim.request_id == first.id
    after = tasks.until_end.enqueue(1)
    assert after.id != first.id
    claim = ledger.claim("w")  # type: ignore[attr-defined]
    assert claim.request_id == after.id
    assert tasks.until_end.enqueue(1).id == after.id  # running: still held
    assert tasks.until_end.get_result(first.id).status == TaskResultStatus.SUCCESSFUL


def test_a_period_holds_the_call_from_its_admission(ledger: object) -> None:
    first = tasks.once_a_minute.enqueue(1)
    run_claimed()  # ended, still within the minute
    assert tasks.once_a_minute.enqueue(1).id == first.id
    ledger.clock_skew_ms = 60_001  # type: ignore[attr-defined]
    assert tasks.once_a_minute.enqueue(1).id != first.id


def test_unique_true_still_holds_the_call_while_the_record_is_kept(ledger: object) -> None:
    first = tasks.unique_add.enqueue(1, 2)
    run_claimed()
    ledger.clock_skew_ms = 3_600_000  # type: ignore[attr-defined]
    again = tasks.unique_add.enqueue(1, 2)
    assert again.id == first.id and again.status == TaskResultStatus.SUCCESSFUL


def test_enqueue_many_answers_each_call_as_enqueue_does(ledger: object) -> None:
    first = tasks.until_start.enqueue(1)
    results = enqueue_many(tasks.until_start, [((1,), {}), ((3,), {}), ((3,), {})])
    assert results[0].id == first.id
    assert results[1].id == results[2].id != first.id
    assert records(ledger) == 2


def test_debounce_moves_the_queued_run_later_up_to_its_most(ledger: object) -> None:
    first = tasks.debounced.enqueue(1)
    record = ledger.resolve(first.id)  # type: ignore[attr-defined]
    created = record.created_at
    assert record.due_at == created + 5_000
    ledger.clock_skew_ms = 4_000  # type: ignore[attr-defined]
    assert tasks.debounced.enqueue(1).id == first.id
    moved = ledger.resolve(first.id).due_at  # type: ignore[attr-defined]
    assert created + 9_000 <= moved < created + 9_500  # 5 s after the repeat
    ledger.clock_skew_ms = 10_000  # type: ignore[attr-defined]
    again = tasks.debounced.enqueue(1)
    assert ledger.resolve(first.id).due_at == created + 12_000  # type: ignore[attr-defined]
    assert again.task.run_after is not None
    assert again.task.run_after.timestamp() * 1000 == created + 12_000
    ledger.clock_skew_ms = 12_000  # type: ignore[attr-defined]
    assert ledger.claim("w").request_id == first.id  # type: ignore[attr-defined]


def test_a_claimed_run_is_never_moved_and_the_next_call_is_queued(ledger: object) -> None:
    first = tasks.debounced.enqueue(1)
    ledger.clock_skew_ms = 5_000  # type: ignore[attr-defined]
    claim = ledger.claim("w")  # type: ignore[attr-defined]
    assert claim.request_id == first.id
    before = ledger.resolve(first.id)  # type: ignore[attr-defined]
    nxt = tasks.debounced.enqueue(1)
    after = ledger.resolve(first.id)  # type: ignore[attr-defined]
    assert nxt.id != first.id
    assert after.state is State.CLAIMED and after.due_at == before.due_at


def test_a_debounce_moves_only_a_run_that_waits_even_with_unique_true(ledger: object) -> None:
    first = tasks.debounced_once.enqueue(1)
    ledger.clock_skew_ms = 5_000  # type: ignore[attr-defined]
    assert ledger.claim("w").request_id == first.id  # type: ignore[attr-defined]
    before = ledger.resolve(first.id)  # type: ignore[attr-defined]
    again = tasks.debounced_once.enqueue(1)  # the one record the derived id names
    assert again.id == first.id and again.status == TaskResultStatus.RUNNING
    after = ledger.resolve(first.id)  # type: ignore[attr-defined]
    assert after.state is State.CLAIMED and after.due_at == before.due_at
    stats = ledger.stats()  # type: ignore[attr-defined]
    assert (stats.pending, stats.claimed) == (0, 1)


@pytest.mark.parametrize("name", ["until_start", "debounced"])
def test_racing_enqueues_and_claims_never_queue_two_runs_of_one_call(
    ledger: object, redis_client: object, name: str
) -> None:
    task = getattr(tasks, name)
    # The claimer's clock a minute ahead: a debounced run is due to it at once.
    claimer = Ledger(redis_client, ledger.namespace, "default")  # type: ignore[attr-defined]
    claimer.clock_skew_ms = 60_000
    stop = threading.Event()
    seen: list[str] = []
    claimed: dict[str, int] = {}

    def enqueue() -> None:
        while not stop.is_set():
            seen.append(task.enqueue(7).id)

    def claim() -> None:
        deadline = time.monotonic() + 20
        while len(claimed) < 20 and time.monotonic() < deadline:
            got = claimer.claim("w")
            if got is not None:
                claimed[got.request_id] = claimer.resolve(got.request_id).due_at  # type: ignore[union-attr]
        stop.set()

    threads = [threading.Thread(target=enqueue) for _ in range(2)]
    threads.append(threading.Thread(target=claim))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(claimed) == 20  # each claim a run of its own
    stats = ledger.stats()  # type: ignore[attr-defined]
    assert stats.pending <= 1 and stats.claimed == 20  # never two queued runs of the call
    runs = ledger.resolve_many(set(seen))  # type: ignore[attr-defined]
    for run in runs:
        if run.request_id in claimed:  # a claimed run is never moved by a later enqueue
            assert run.state is State.CLAIMED and run.due_at == claimed[run.request_id]
        else:
            assert run.state is State.PENDING
    # Each run was admitted only after the one before it was claimed (ties within a
    # millisecond: the one claimed first came first; the queued one last).
    runs.sort(key=lambda r: (r.created_at, r.lease_until or float("inf")))
    for before, after in itertools.pairwise(runs):
        assert before.state is State.CLAIMED
        assert after.created_at >= before.lease_until - 30_000 - 60_000


@pytest.mark.django_db(transaction=True)
def test_what_cannot_keep_the_promise_is_refused_saying_why(ledger: object) -> None:
    with pytest.raises(InvalidTask, match="debounce but is not unique"):
        tasks.debounced_not_unique.enqueue(1)
    with pytest.raises(InvalidTask, match=r"inside transaction\.atomic"), transaction.atomic():
        tasks.until_start.enqueue(1)
    with pytest.raises(ValueError, match="unique must be True, False, 'until_start'"):
        LedgerTask(func=tasks.until_start.func, unique="until_lunch")
    with pytest.raises(ValueError, match="unique must be more than 0"):
        LedgerTask(func=tasks.until_start.func, unique=-5)
    with pytest.raises(TypeError, match="debounce must be a timedelta or a number"):
        LedgerTask(func=tasks.until_start.func, unique=True, debounce="soon")
    assert records(ledger) == 0
