"""One tick at a time, in this process, on the suite's Redis: decide, claim, admit, once.

Server time is pinned with the store's clock seam (``clock_skew_ms``), so a tick "at"
any instant runs now; nothing waits for a clock. Crashes between the two steps are
simulated here by an exception that escapes the tick; the real SIGKILL is in
``test_scheduler_processes.py``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from django_ledger import AdmissionStatus, Ledger, LedgerUnavailable
from django_ledger.core.dispatch import DispatchUnavailable, RedisDispatchRegistry
from django_ledger.core.schedule import (
    FIRE_LEASE_MS,
    Cron,
    Every,
    Fire,
    Misfire,
    Outcome,
    Schedule,
    ScheduleStore,
    Ticker,
    decide,
    state_key,
    zone_of,
)
from tests.support.redis_server import RedisServer

MINUTE = Every(60)
T0 = 1_750_000_020  # a multiple of 60: 2025-06-15 15:07:00 UTC


class Crash(BaseException):
    """Stands for the process dying: nothing in the tick catches it."""


class Node:
    """One scheduler node's parts on a namespace: store, registry, ledger, ticker."""

    def __init__(self, client: redis.Redis, namespace: str, node_id: str, **ticker: Any) -> None:
        self.store = ScheduleStore(client, namespace)
        self.registry = RedisDispatchRegistry(client, namespace=namespace)
        self.ledger = Ledger(client, namespace, "default")
        self.admissions: list[tuple[str, AdmissionStatus]] = []
        self.ticker = Ticker(self.store, self.registry, self.admit, node_id, **ticker)

    def admit(self, fire: Fire) -> AdmissionStatus:
        status = self.ledger.admit(fire.request_id, f'{{"task":"{fire.key}"}}').status
        self.admissions.append((fire.request_id, status))
        return status

    def at(self, epoch_ms: int) -> Node:
        """Pin this node's server clock to ``epoch_ms`` (it then runs on from there)."""
        self.store.clock_skew_ms = 0
        self.store.clock_skew_ms = epoch_ms - self.store.server_time_ms()
        return self

    def tick(self, *schedules: Schedule) -> Any:
        return self.ticker.tick(schedules)


@pytest.fixture
def make_node(redis_client: redis.Redis, namespace: str) -> Iterator[Callable[..., Node]]:
    yield lambda node_id="node-a", **kw: Node(redis_client, namespace, node_id, **kw)
    redis_client.delete(state_key(namespace))


def every_minute(key: str = "job", **kw: Any) -> Schedule:
    return Schedule(key, MINUTE, **kw)


def records(node: Node) -> list[str]:
    return sorted(k.decode() for k in node.ledger.redis.hkeys(node.ledger.records_key))


def test_a_schedule_seen_first_starts_from_now(make_node: Callable[..., Node]) -> None:
    node = make_node().at(T0 * 1000 + 30_500)

    report = node.tick(every_minute())

    assert report.events == []
    assert node.store.snapshot().through["job"] == T0 + 30
    assert node.at((T0 + 60) * 1000 + 100).tick(every_minute()).admitted == 1


def test_a_due_fire_is_claimed_then_admitted_once(make_node: Callable[..., Node]) -> None:
    node = make_node()
    node.store.set_through("job", T0)

    report = node.at((T0 + 60) * 1000 + 500).tick(every_minute())

    assert [(e.fire.request_id, e.outcome) for e in report.events] == [
        (f"schedule:job:{T0 + 60}", Outcome.ADMITTED)
    ]
    dispatch = node.registry.find_dispatch("job", T0 + 60)
    assert dispatch is not None and dispatch.node_id == "node-a"
    assert dispatch.status == "dispatched"
    assert records(node) == [f"schedule:job:{T0 + 60}"]
    snapshot = node.store.snapshot()
    assert snapshot.through["job"] == T0 + 60 and snapshot.pending == {}
    assert node.tick(every_minute()).events == []  # the same second again: nothing


def test_nodes_racing_on_the_same_fires_admit_each_once(
    make_node: Callable[..., Node],
) -> None:
    nodes = [make_node(f"node-{n}") for n in range(6)]
    nodes[0].store.set_through("job", T0)
    barrier = threading.Barrier(len(nodes))
    schedule = Schedule("job", Every(1), misfire=Misfire.ALL)

    def run(node: Node) -> None:
        for second in range(1, 21):
            barrier.wait()
            node.at((T0 + second) * 1000 + 10).tick(schedule)

    threads = [threading.Thread(target=run, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    admitted = Counter(
        rid
        for node in nodes
        for rid, status in node.admissions
        if status is AdmissionStatus.ADMITTED
    )
    expected = [f"schedule:job:{T0 + s}" for s in range(1, 21)]
    assert sorted(admitted) == sorted(expected)
    assert set(admitted.values()) == {1}
    assert records(nodes[0]) == sorted(expected)
    assert len(nodes[0].registry.history("job", limit=100)) == 20


def test_a_node_dead_between_claim_and_admission_leaves_the_fire_to_the_next_tick(
    make_node: Callable[..., Node],
) -> None:
    def die(fire: Fire) -> None:
        raise Crash

    dying = make_node("node-dying", after_claim=die)
    other = make_node("node-other")
    dying.store.set_through("job", T0)
    fire_at = (T0 + 60) * 1000 + 500

    with pytest.raises(Crash):
        dying.at(fire_at).tick(every_minute())

    assert records(other) == []  # claimed, not admitted
    assert other.registry.find_dispatch("job", T0 + 60).node_id == "node-dying"  # type: ignore[union-attr]
    # Within the dying node's lease, others leave the fire alone ...
    assert other.at(fire_at + FIRE_LEASE_MS - 1500).tick(every_minute()).events == []
    # ... and after it, the next tick finishes it, once.
    report = other.at(fire_at + FIRE_LEASE_MS + 100).tick(every_minute())

    assert [(e.fire.epoch, e.outcome, e.recovered) for e in report.events] == [
        (T0 + 60, Outcome.ADMITTED, True)
    ]
    dispatch = other.registry.find_dispatch("job", T0 + 60)
    assert dispatch is not None and (dispatch.node_id, dispatch.status) == (
        "node-other",
        "recovered",
    )
    assert records(other) == [f"schedule:job:{T0 + 60}"]
    assert other.store.snapshot().pending == {}
    assert other.tick(every_minute()).events == []


def test_a_node_dead_after_admission_is_finished_as_a_duplicate(
    make_node: Callable[..., Node],
) -> None:
    dying = make_node("node-dying")
    original = dying.admit

    def admit_then_die(fire: Fire) -> AdmissionStatus:
        original(fire)
        raise Crash

    dying.ticker.admit = admit_then_die
    other = make_node("node-other")
    dying.store.set_through("job", T0)
    fire_at = (T0 + 60) * 1000 + 500

    with pytest.raises(Crash):
        dying.at(fire_at).tick(every_minute())
    report = other.at(fire_at + FIRE_LEASE_MS + 100).tick(every_minute())

    assert [(e.outcome, e.recovered) for e in report.events] == [(Outcome.DUPLICATE, True)]
    assert records(other) == [f"schedule:job:{T0 + 60}"]


def test_a_full_queue_defers_the_fire_and_its_node_tries_again_next_tick(
    make_node: Callable[..., Node], redis_client: redis.Redis, namespace: str
) -> None:
    node = make_node()
    node.ledger = Ledger(redis_client, namespace, "default", max_records=1)
    assert node.ledger.admit("filler", "x").status is AdmissionStatus.ADMITTED
    node.store.set_through("job", T0)

    first = node.at((T0 + 60) * 1000 + 500).tick(every_minute())

    assert [e.outcome for e in first.events] == [Outcome.DEFERRED]
    assert list(node.store.snapshot().pending["job"]) == [T0 + 60]
    claim = node.ledger.claim("w")
    assert claim is not None and node.ledger.settle(claim).status.name == "SETTLED"
    second = node.tick(every_minute())
    assert [e.outcome for e in second.events] == [Outcome.ADMITTED]
    assert node.store.snapshot().pending == {}


def test_a_client_clock_hours_off_changes_nothing(
    make_node: Callable[..., Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    node = make_node()
    node.store.set_through("job", T0)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 5 * 3600)

    report = node.at((T0 + 60) * 1000 + 500).tick(every_minute())

    assert [e.fire.epoch for e in report.events] == [T0 + 60]
    assert node.store.snapshot().through["job"] == T0 + 60
    assert node.tick(every_minute()).events == []


def test_a_pause_is_honoured_at_the_next_tick_and_a_resume_runs_no_backlog(
    make_node: Callable[..., Node],
) -> None:
    node = make_node()
    node.store.set_through("job", T0)
    node.store.pause("job", "alice")

    paused = node.at((T0 + 180) * 1000 + 500).tick(every_minute(misfire=Misfire.ALL))

    assert paused.events == [] and paused.paused == [("job", T0 + 60, T0 + 180)]
    assert node.store.snapshot().paused["job"].by == "alice"
    assert node.store.resume("job")
    resumed = node.at((T0 + 240) * 1000 + 500).tick(every_minute(misfire=Misfire.ALL))
    assert [e.fire.epoch for e in resumed.events] == [T0 + 240]


def test_a_disabled_schedule_admits_nothing(make_node: Callable[..., Node]) -> None:
    node = make_node()
    node.store.set_through("job", T0)

    report = node.at((T0 + 60) * 1000 + 500).tick(every_minute(enabled=False))

    assert report.events == [] and records(node) == []
    assert node.store.snapshot().through["job"] == T0 + 60


@pytest.mark.parametrize("misfire", list(Misfire))
def test_each_misfire_policy_after_a_downtime(
    make_node: Callable[..., Node], misfire: Misfire
) -> None:
    node = make_node()
    schedule = every_minute(misfire=misfire, grace_ms=30 * 60_000)
    node.store.set_through("job", T0)
    now_ms = (T0 + 2 * 3600) * 1000 + 500  # two hours down

    report = node.at(now_ms).tick(schedule)

    expected = decide(MINUTE, T0, report.now_ms, misfire, 30 * 60_000)
    assert [e.fire.epoch for e in report.events] == list(expected.fires)
    assert records(node) == sorted(f"schedule:job:{epoch}" for epoch in expected.fires)
    assert len(report.events) == {Misfire.LATEST: 2, Misfire.ALL: 30, Misfire.SKIP: 1}[misfire]
    assert expected.dropped is not None
    assert report.dropped == [("job", *expected.dropped)]


@pytest.mark.parametrize(("limit", "ticks"), [(None, [100, 100, 50]), (120, [120, 120, 10])])
def test_all_catches_up_more_than_one_decision_over_several_ticks(
    make_node: Callable[..., Node], limit: int | None, ticks: list[int]
) -> None:
    node = make_node() if limit is None else make_node(limit=limit)
    schedule = Schedule("job", Every(1), misfire=Misfire.ALL, grace_ms=3_600_000)
    node.store.set_through("job", T0)

    reports = [node.at((T0 + 250) * 1000 + 500).tick(schedule) for _ in range(3)]

    assert [len(r.events) for r in reports] == ticks
    assert [r.more for r in reports] == [True, True, False]
    assert len(records(node)) == 250


def test_a_failing_schedule_does_not_stop_the_others(make_node: Callable[..., Node]) -> None:
    node = make_node()
    original = node.admit

    def admit(fire: Fire) -> AdmissionStatus:
        if fire.key == "broken":
            raise RuntimeError("boom")
        return original(fire)

    node.ticker.admit = admit
    node.store.set_through("broken", T0)
    node.store.set_through("job", T0)

    report = node.at((T0 + 60) * 1000 + 500).tick(every_minute("broken"), every_minute("job"))

    assert report.errors == [("broken", "RuntimeError: boom")]
    assert [e.fire.key for e in report.events] == ["job"]
    assert list(node.store.snapshot().pending) == ["broken"]  # retried at the next tick


def test_a_corrupt_state_starts_the_schedule_again_from_now(
    make_node: Callable[..., Node], redis_client: redis.Redis, namespace: str
) -> None:
    node = make_node()
    redis_client.hset(state_key(namespace), "through job", "garbage")

    node.at(T0 * 1000 + 500).tick(every_minute())

    assert node.store.snapshot().through["job"] == T0


def test_a_cron_schedule_ticks_in_its_time_zone(make_node: Callable[..., Node]) -> None:
    node = make_node()
    spring = Schedule("paris", Cron("30 2 * * *", zone_of("Europe/Paris")))
    jump = 1_743_296_400  # 2025-03-30 01:00 UTC: 03:00 CEST, where 02:30 went
    node.store.set_through("paris", jump - 3600)

    report = node.at(jump * 1000 + 200).tick(spring)

    assert [e.fire.request_id for e in report.events] == [f"schedule:paris:{jump}"]


def test_redis_down_raises_and_a_restart_keeps_what_was_decided(
    fresh_redis: RedisServer,
) -> None:
    client = fresh_redis.client()
    node = Node(client, "down", "node-a", after_claim=lambda fire: fresh_redis.kill())
    node.store.set_through("job", T0)

    with pytest.raises(LedgerUnavailable):
        node.at((T0 + 60) * 1000 + 500).tick(every_minute())
    fresh_redis.restart()
    node.ticker.after_claim = None
    report = node.tick(every_minute())

    assert [(e.fire.epoch, e.outcome) for e in report.events] == [(T0 + 60, Outcome.ADMITTED)]
    client.close()


def test_a_schedule_whose_queue_is_away_waits_while_the_others_fire(
    make_node: Callable[..., Node],
) -> None:
    # On a cluster with one master down, one schedule's queue is away and the others' not
    # (tests/cluster/test_cluster_master_down.py runs it for real); here its admission says so.
    node = make_node()
    away = {"on"}
    admit = node.admit

    def admit_unless_away(fire: Fire) -> AdmissionStatus:
        if fire.key == "away" and away:
            raise LedgerUnavailable("the queue's master is down")
        return admit(fire)

    node.ticker.admit = admit_unless_away
    node.store.set_through("away", T0)
    node.store.set_through("job", T0)
    schedules = (every_minute("away"), every_minute("job"))

    report = node.at((T0 + 60) * 1000 + 100).tick(*schedules)
    assert [(e.fire.key, e.outcome) for e in report.events] == [("job", Outcome.ADMITTED)]
    assert [key for key, _ in report.unavailable] == ["away"]
    assert node.store.snapshot().pending["away"].keys() == {T0 + 60}

    away.clear()
    report = node.at((T0 + 120) * 1000 + 100).tick(*schedules)
    assert sorted((e.fire.key, e.fire.epoch) for e in report.events) == [
        ("away", T0 + 60), ("away", T0 + 120), ("job", T0 + 120),
    ]  # fmt: skip
    assert report.unavailable == []


def test_a_fire_whose_dispatch_record_cannot_be_written_is_admitted_all_the_same(
    make_node: Callable[..., Node],
) -> None:
    node = make_node()

    def registry_away(*args: Any) -> bool:
        raise DispatchUnavailable("the registry's master is down")

    node.registry.claim_dispatch = registry_away  # type: ignore[method-assign]
    node.store.set_through("job", T0)
    report = node.at((T0 + 60) * 1000 + 100).tick(every_minute())
    assert [(e.fire.epoch, e.outcome) for e in report.events] == [(T0 + 60, Outcome.ADMITTED)]
    assert records(node) == [f"schedule:job:{T0 + 60}"]
    assert node.store.snapshot().pending == {}
