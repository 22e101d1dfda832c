"""The scheduler's counts: fires, skips and misfires per schedule, one call per tick."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import Client

from django_ledger import AdmissionStatus, Ledger
from django_ledger.conf import get_ledger
from django_ledger.core.counters import Counters
from django_ledger.core.dispatch import RedisDispatchRegistry
from django_ledger.core.schedule import Every, Fire, Misfire, Schedule, ScheduleStore, Ticker

T0 = 1_750_000_020  # a multiple of 60


class Node:
    def __init__(self, client: redis.Redis, namespace: str, count: bool = True) -> None:
        self.store = ScheduleStore(client, namespace)
        self.ledger = Ledger(client, namespace, "default")
        registry = RedisDispatchRegistry(client, namespace=namespace)
        self.ticker = Ticker(self.store, registry, self.admit, "node-a", count=count)

    def admit(self, fire: Fire) -> AdmissionStatus:
        return self.ledger.admit(fire.request_id, f'{{"task":"{fire.key}"}}').status

    def tick_at(self, epoch_ms: int, *schedules: Schedule) -> object:
        self.store.clock_skew_ms = 0
        self.store.clock_skew_ms = epoch_ms - self.store.server_time_ms()
        return self.ticker.tick(schedules)


@pytest.fixture
def counters(redis_client: redis.Redis, namespace: str) -> Iterator[Counters]:
    yield Counters(redis_client, namespace)


def test_fires_skips_and_misfires_are_counted_per_schedule(
    redis_client: redis.Redis, namespace: str, counters: Counters
) -> None:
    node = Node(redis_client, namespace)
    late = Schedule("late", Every(60), misfire=Misfire.LATEST, grace_ms=30 * 60_000)
    held = Schedule("held", Every(60))
    for key in ("late", "held"):
        node.store.set_through(key, T0)
    node.store.pause("held", "alice")

    node.tick_at((T0 + 2 * 3600) * 1000 + 500, late, held)  # two hours down
    fired = len(node.ledger.redis.hkeys(node.ledger.records_key))
    node.tick_at((T0 + 2 * 3600 + 60) * 1000 + 500, late, held)  # one more fire, on time

    counts = counters.schedule_counts("hour")
    assert fired == 2  # LATEST: the newest missed fire and the one due now
    # 120 fires came due while down: 2 fired, 118 dropped; then one more on time.
    assert counts["late"] == {"fired": 3, "skipped": 0, "misfired": 118}
    assert counts["held"] == {"fired": 0, "skipped": 121, "misfired": 0}
    assert counters.schedule_counts("day") == counts
    # In the schedules' own hash tag: on a Redis Cluster, on the state's node.
    keys = list(redis_client.scan_iter(match=f"{{{namespace}}}:schedules:counts*"))
    assert keys and all(k.startswith(f"{{{namespace}}}:".encode()) for k in keys)


def test_a_ticker_that_does_not_count_writes_no_counts(
    redis_client: redis.Redis, namespace: str, counters: Counters
) -> None:
    node = Node(redis_client, namespace, count=False)
    node.store.set_through("job", T0)
    node.tick_at((T0 + 60) * 1000 + 500, Schedule("job", Every(60)))
    assert len(node.ledger.redis.hkeys(node.ledger.records_key)) == 1
    assert counters.schedule_counts() == {}
    assert list(redis_client.scan_iter(match=f"{{{namespace}}}:schedules:counts*")) == []


@pytest.mark.django_db
def test_the_schedules_page_has_each_schedules_counts_of_the_last_hour(
    settings: Any, namespace: str, admin_client: Client
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "DISPATCH": {"NAMESPACE": namespace},
        "SCHEDULES": {"beat": {"TASK": "tests.support.tasks_app.tasks.noop", "EVERY": 60}},
    }
    Counters(get_ledger("default").redis, namespace).add_schedules({"F:beat": 4, "M:beat": 2})
    response = admin_client.get("/admin/django_ledger/schedule/")
    assert response.status_code == 200
    rows = {row["key"]: row for row in response.context["rows"]}
    assert rows["beat"]["counts"] == {"fired": 4, "skipped": 0, "misfired": 2}
    assert "4 fired, 0 skipped, 2 misfired" in response.content.decode()
