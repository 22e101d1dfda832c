"""The workers' counters in Redis (``core/counters.py``): what they add, read and keep.

Written with an injected clock (the script takes the time as an argument), so a month
of minutes is written in seconds; runs on a cluster too (``LEDGER_TEST_CLUSTER=1``).
"""

from __future__ import annotations

import json

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from redis.cluster import RedisCluster
from redis.crc import key_slot

from django_ledger import Ledger
from django_ledger.core.counters import EDGES, MAX_ERROR, Counters, Depth, Tally, percentile
from django_ledger.core.library import library, script
from tests.support.counter_month import CLUSTER_BYTES_PER_KEY, MINUTES_A_MONTH, month_of_minutes

#: Wednesday 2027-01-13 08:00 UTC, on a minute.
T0 = 1_800_000_000_000 - 1_800_000_000_000 % 3_600_000
MINUTE, HOUR = 60_000, 3_600_000
#: The stated bound (docs/admin.md): bytes a task name costs over a month when it uses
#: every outcome and every histogram bucket every minute.
TASK_BYTES_BOUND = 4_000_000
#: The stated bound of a queue's depth samples over a month (docs/admin.md), the same
#: as test_counters_depth's (there on their own; here they share the counts' hashes).
DEPTH_BYTES_BOUND = 600_000


def keys_of(client: redis.Redis | RedisCluster, namespace: str, queue: str) -> list[bytes]:
    return list(client.scan_iter(match=f"{{{namespace}:{queue}}}:counts*", count=1000))


def test_counts_and_times_read_back_per_queue_and_task(
    redis_client: redis.Redis, namespace: str
) -> None:
    counters, tally = Counters(redis_client, namespace), Tally()
    for _ in range(90):
        tally.add("emails", "app.send", "completed", run_s=0.04, wait_s=0.3)
    for _ in range(10):
        tally.add("emails", "app.send", "failed", run_s=20, wait_s=0.3)
    tally.add("emails", "app.resize", "retry", run_s=1.5)
    tally.add("emails", "", "lost")
    counters.add("emails", tally.take()["emails"], now_ms=T0 + 5 * MINUTE + 10)
    assert tally.take() == {}  # taken once: a second flush writes nothing again

    series = counters.read("emails", "hour", now_ms=T0 + 6 * MINUTE)
    assert len(series.buckets) == 60 and series.bucket_seconds == 60
    at = series.starts.index(T0 + 5 * MINUTE)
    assert series.buckets[at].counts == {
        "completed": 90,
        "failed": 10,
        "retry": 1,
        "lost": 1,
        "dead": 0,
    }
    assert sum(b.runs for i, b in enumerate(series.buckets) if i != at) == 0
    tasks = series.tasks()
    assert sorted(tasks) == ["-", "app.resize", "app.send"]
    send = tasks["app.send"]
    assert (send.runs, send.failure_rate) == (100, 0.1)
    quantiles = send.quantiles()
    assert 0.025 < quantiles["run_p50"] <= 0.05  # the 0.025-0.05 bucket
    assert 10 < quantiles["run_p95"] <= 30
    assert 0.25 < quantiles["wait_p95"] <= 0.5

    # The same counts, rolled into the hour, read by the day and week windows.
    for window, buckets in (("day", 24), ("week", 168)):
        day = counters.read("emails", window, now_ms=T0 + 6 * MINUTE)
        assert len(day.buckets) == buckets and day.bucket_seconds == 3600
        assert day.buckets[-1].counts["completed"] == 90
        assert day.starts[-1] == T0


def test_a_percentile_reads_back_from_the_bucket_edges() -> None:
    histogram = [0] * (len(EDGES) + 1)
    assert percentile(histogram, 0.5) is None
    histogram[EDGES.index(1)] = 100  # everything took 0.5 to 1 s
    assert percentile(histogram, 0.5) == pytest.approx(0.75)
    histogram[len(EDGES)] = 1000  # past the last edge: read as the last edge
    assert percentile(histogram, 0.99) == EDGES[-1]


def test_bad_input_is_refused_and_writes_nothing(redis_client: redis.Redis, namespace: str) -> None:
    counters = Counters(redis_client, namespace)
    with pytest.raises(redis.exceptions.ResponseError, match="whole number"):
        counters.add("q", {"d:app.t": 1, "f:app.t": -2}, now_ms=T0)
    assert keys_of(redis_client, namespace, "q") == []
    with pytest.raises(ValueError, match="window must be one of hour, day, week"):
        counters.read("q", "month")


def test_memory_stays_bounded_over_a_month_of_minutes(
    redis_client: redis.Redis, namespace: str
) -> None:
    """Every metric of one task and a depth sample, every minute for 31 days.

    A day of minutes and 30 days of hours are kept, each with the queue's depth.
    """
    task = "myproject.tasks.send_welcome_email"
    added: list[tuple[str, int]] = [(f"{code}:{task}", 1000) for code in "dfrlx"]
    for index in range(len(EDGES) + 1):
        added += [(f"t{index}:{task}", 100), (f"w{index}:{task}", 100)]
    counters = Counters(redis_client, namespace)
    prefix = counters.prefix("q")
    indexes = counters.depth_keys("q")[1:]  # the indexes a sample reads
    ledger = Ledger(redis_client, namespace, "q")
    for n in range(1200):  # four-digit depths: the samples' fields at a realistic size
        ledger.admit(f"r-{n}", "work", delay=0 if n % 2 else 3600)
    if isinstance(redis_client, RedisCluster):
        node = redis_client.get_node_from_key(prefix)
        server = redis_client.get_redis_connection(node)
    else:
        server = redis_client
    server.function_load(library().source, replace=True)
    function = script("counters").function
    minutes = MINUTES_A_MONTH
    pipe = server.pipeline(transaction=False)
    for n, (minute, times) in enumerate(month_of_minutes()):
        at = T0 + minute * MINUTE
        error = json.dumps(["app.errors.Boom", "x" * MAX_ERROR, at])  # the task's last error
        keys = counters.add_keys(prefix, at, indexes)
        flat = [x for field, count in added for x in (field, count * times)]
        pipe.fcall(function, len(keys), *keys, 0, at, 1, 1000, task, error, *flat)
        if n % 500 == 499:
            pipe.execute()
    pipe.execute()

    keys = keys_of(redis_client, namespace, "q")
    minute_keys = [k for k in keys if b":counts:m:" in k]
    hour_keys = [k for k in keys if b":counts:h:" in k]
    assert len(minute_keys) == 1440  # a day of minutes
    assert len(hour_keys) == 720  # 30 days of hours
    assert len(keys) == 1440 + 720 + 3  # and the two indexes and the last errors
    used = sum(redis_client.memory_usage(k) or 0 for k in keys)
    slot_lists = CLUSTER_BYTES_PER_KEY * len(keys) if isinstance(redis_client, RedisCluster) else 0
    assert used <= TASK_BYTES_BOUND + DEPTH_BYTES_BOUND + slot_lists, used
    # The oldest minute kept is a day back; the newest hour holds its 60 minutes.
    last = T0 + (minutes - 1) * MINUTE
    assert min(int(k.rsplit(b":", 1)[1]) for k in minute_keys) == last // MINUTE - 1439
    week = counters.read("q", "week", now_ms=last)
    assert week.buckets[-1].counts["completed"] == 60 * 1000
    assert week.depth[-1] == Depth(pending=1200, due=600, claimed=0, dead=0)
    assert all(d == week.depth[-1] for d in counters.read("q", "hour", now_ms=last).depth)


def test_a_queue_keeps_its_counters_in_its_own_slot(
    redis_client: redis.Redis, namespace: str
) -> None:
    counters, tally = Counters(redis_client, namespace), Tally()
    for queue in ("emails", "images", "reports"):
        tally.add(queue, "app.t", "completed", run_s=0.1, wait_s=0.1)
    counters.flush(tally, force=True)
    for queue in ("emails", "images", "reports"):
        slot = key_slot(f"{{{namespace}:{queue}}}:records".encode())
        keys = keys_of(redis_client, namespace, queue)
        assert len(keys) == 4
        assert {key_slot(k) for k in keys} == {slot}
        assert counters.read(queue, "hour").total.counts["completed"] == 1


OUTCOME_CODES = {"completed": "d", "failed": "f", "retry": "r", "lost": "l", "dead": "x"}
durations = st.none() | st.floats(min_value=-1, max_value=4000, allow_nan=False)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["emails", "images"]),
            st.sampled_from(["", "app.send", "app.résumé"]),
            st.sampled_from(list(OUTCOME_CODES)),
            durations,
            durations,
        ),
        max_size=60,
    )
)
def test_a_tally_spreads_into_the_fields_each_settlement_adds_to(
    settlements: list[tuple[str, str, str, float | None, float | None]],
) -> None:
    """What a flush writes: each settlement's outcome and time buckets, field by field."""
    tally, expected = Tally(), {}  # type: ignore[var-annotated]
    for queue, task, outcome, run_s, wait_s in settlements:
        tally.add(queue, task, outcome, run_s, wait_s)
        name = task or "-"
        fields = expected.setdefault(queue, {})
        keys = [f"{OUTCOME_CODES[outcome]}:{name}"]
        if run_s is not None:
            keys.append(
                f"t{next((i for i, e in enumerate(EDGES) if run_s <= e), len(EDGES))}:{name}"
            )
        if wait_s is not None:
            wait = max(0.0, wait_s)
            keys.append(
                f"w{next((i for i, e in enumerate(EDGES) if wait <= e), len(EDGES))}:{name}"
            )
        for key in keys:
            fields[key] = fields.get(key, 0) + 1
    assert tally.take() == expected
    assert tally.take() == {}


def test_an_unknown_outcome_is_refused_when_counted() -> None:
    tally = Tally()
    with pytest.raises(KeyError):
        tally.add("q", "app.t", "exploded")
    assert tally.take() == {}
