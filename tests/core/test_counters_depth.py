"""The queue's depth over time (``core/counters.py``): sampled in the counters' flush.

Each flush a worker makes samples the depth of the queues it serves (pending, due now,
claimed, dead) into the minute and the hour it writes, in the same script call; these
tests drive the flush directly, with a real ledger's records, and through a worker.
"""

from __future__ import annotations

import signal
from pathlib import Path

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from django_ledger import Ledger
from django_ledger.core.counters import Counters, Depth, Tally
from django_ledger.core.library import library, script
from django_ledger.core.sharded import ShardedLedger
from tests.support.counter_month import CLUSTER_BYTES_PER_KEY, month_of_minutes
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until

#: Wednesday 2027-01-13 08:00 UTC, on a minute (as test_counters_core).
T0 = 1_800_000_000_000 - 1_800_000_000_000 % 3_600_000
MINUTE = 60_000


def stage(ledger: Ledger) -> Depth:
    """One dead, then five due, two later, two of the due claimed: as ``stats()`` says."""
    ledger.admit("d-0", "work")
    assert ledger.claim("owner-gone", lease=0.05) is not None
    wait_until(lambda: ledger.stats().expired_leases == 1, what="the lease to expire")
    assert ledger.sweep().dead == 1  # max_attempts 1: its one attempt is spent
    for n in range(7):
        ledger.admit(f"p-{n}", "work", delay=0 if n < 5 else 3600)
    for n in range(2):
        assert ledger.claim(f"owner-{n}", lease=60) is not None
    stats = ledger.stats()
    return Depth(stats.pending, stats.pending_due, stats.claimed, stats.dead)


def test_a_flush_samples_the_queues_depth_into_its_minute_and_hour(
    redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "emails", max_attempts=1)
    depth = stage(ledger)
    assert depth == Depth(pending=5, due=3, claimed=2, dead=1)
    counters, tally = Counters(redis_client, namespace), Tally()
    seen: list[tuple[str, Depth]] = []
    counters.on_sample = lambda queue, sample: seen.append((queue, sample))
    tally.add("emails", "app.send", "completed", run_s=0.1, wait_s=0.1)

    assert counters.flush(tally, force=True, queues=["emails"])
    assert seen == [("emails", depth)]  # what the Prometheus gauges are given
    hour = counters.read("emails", "hour")
    assert hour.depth[-1] == depth
    assert hour.buckets[-1].counts["completed"] == 1  # the same call, the same minute
    assert all(d is None for d in hour.depth[:-1])  # no sample: no depth, not zero
    assert counters.read("emails", "day").depth[-1] == depth
    assert counters.read("emails", "week").depth[-1] == depth


def test_a_bucket_keeps_the_most_any_sample_saw(redis_client: redis.Redis, namespace: str) -> None:
    """Two samples in one minute (two workers, or one twice): the peak, not a sum."""
    ledger = Ledger(redis_client, namespace, "q")
    counters = Counters(redis_client, namespace)
    for n in range(4):
        ledger.admit(f"a-{n}", "work")
    assert counters.add("q", {}, now_ms=T0 + 10, sample=True) == Depth(4, 4, 0, 0)
    for _ in range(3):
        assert ledger.claim("w", lease=60) is not None
    assert counters.add("q", {}, now_ms=T0 + 20_000, sample=True) == Depth(1, 1, 3, 0)
    # The next minute sees only the later sample; its hour, the most of both minutes.
    assert counters.add("q", {}, now_ms=T0 + MINUTE, sample=True) == Depth(1, 1, 3, 0)
    hour = counters.read("q", "hour", now_ms=T0 + MINUTE)
    assert hour.depth[-2:] == [Depth(4, 4, 3, 0), Depth(1, 1, 3, 0)]
    day = counters.read("q", "day", now_ms=T0 + MINUTE)
    assert day.depth[-1] == Depth(4, 4, 3, 0)


def test_an_idle_queue_is_sampled_and_counters_off_sample_nothing(
    redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "idle")
    ledger.admit("later", "work", delay=3600)
    counters = Counters(redis_client, namespace)
    # Nothing counted: the served queue is sampled in a call of its own.
    assert counters.flush(Tally(), force=True, queues=["idle"])
    assert counters.read("idle").depth[-1] == Depth(pending=1, due=0, claimed=0, dead=0)
    # A queue the worker does not serve is not sampled (its own workers do that).
    assert counters.read("other").depth[-1] is None
    # Nothing due, nothing claimed: an idle worker makes no more calls for it...
    seen: list[Depth] = []
    counters.on_sample = lambda queue, depth: seen.append(depth)
    assert counters.flush(Tally(), force=True, queues=["idle"]) and seen == []
    # ...until it counts something on it; then, with a record due, while idle too.
    ledger.admit("due", "work")
    tally = Tally()
    tally.add("idle", "app.t", "completed", run_s=0.1, wait_s=0.1)
    counters.flush(tally, force=True, queues=["idle"])
    counters.flush(Tally(), force=True, queues=["idle"])
    assert seen == [Depth(pending=2, due=1, claimed=0, dead=0)] * 2

    off = Counters(redis_client, namespace + "-off")
    assert off.flush(Tally(enabled=False), force=True, queues=["idle"])
    assert list(redis_client.scan_iter(match=f"{{{namespace}-off:*", count=1000)) == []


def test_a_queue_keeps_its_depth_samples_in_its_own_slot(
    redis_client: redis.Redis, namespace: str
) -> None:
    """On a cluster (LEDGER_TEST_CLUSTER=1) each queue's samples sit on its own node."""
    counters, tally = Counters(redis_client, namespace), Tally()
    queues = ("emails", "images", "reports")
    for count, queue in enumerate(queues, start=1):
        ledger = Ledger(redis_client, namespace, queue)
        for n in range(count):
            ledger.admit(f"{queue}-{n}", "work")
        tally.add(queue, "app.t", "completed", run_s=0.1, wait_s=0.1)
    counters.flush(tally, force=True, queues=queues)
    for count, queue in enumerate(queues, start=1):
        slot = key_slot(f"{{{namespace}:{queue}}}:records".encode())
        keys = list(redis_client.scan_iter(match=f"{{{namespace}:{queue}}}:counts*", count=1000))
        assert {key_slot(k) for k in keys} == {slot} and len(keys) == 4
        assert counters.read(queue).depth[-1] == Depth(count, count, 0, 0)
        if isinstance(redis_client, RedisCluster):  # the node serving the queue holds them
            node = redis_client.get_node_from_key(f"{{{namespace}:{queue}}}:records")
            server = redis_client.get_redis_connection(node)
            assert all(server.exists(k) for k in keys)


def test_a_sharded_queue_sums_its_shards_samples(redis_client: redis.Redis, namespace: str) -> None:
    sharded = ShardedLedger(redis_client, namespace, "wide", shards=3)
    for n in range(30):
        sharded.admit(f"r-{n}", "work")
    for _ in range(4):
        assert sharded.claim("w", lease=60) is not None
    stats = sharded.stats()
    counters = Counters(redis_client, namespace)
    assert counters.flush(Tally(), force=True, queues=["wide"])
    # Each shard's sample in its own slot; read back summed.
    assert counters.read("wide", shards=3).depth[-1] == Depth(
        stats.pending, stats.pending_due, stats.claimed, stats.dead
    )
    assert counters.read("wide").depth[-1] != counters.read("wide", shards=3).depth[-1]


def test_a_worker_samples_the_depth_of_its_queues(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    """A real worker: its beats' flushes sample the queues it serves while it waits."""
    raw = Ledger(redis_client, namespace, "raw")
    sharded = ShardedLedger(redis_client, namespace, "sharded", shards=3)
    for n in range(3):
        raw.admit(f"l-{n}", "work", delay=3600)  # nothing for the worker to run
    for n in range(7):
        sharded.admit(f"s-{n}", "work", delay=3600)
    counters = Counters(redis_client, namespace)

    def latest(queue: str, shards: int = 1) -> Depth | None:
        found = [d for d in counters.read(queue, shards=shards).depth if d is not None]
        return found[-1] if found else None

    def depth_of(ledger: Ledger | ShardedLedger) -> Depth:
        stats = ledger.stats()
        return Depth(stats.pending, stats.pending_due, stats.claimed, stats.dead)

    worker = WorkerProcess(redis_server.url, namespace, ["raw", "sharded"], tmp_path / "w.log")
    try:
        wait_until(
            lambda: latest("raw") is not None and latest("sharded", 3) is not None,
            what="the worker's first depth samples",
        )
        assert latest("raw") == depth_of(raw) == Depth(pending=3, due=0, claimed=0, dead=0)
        assert latest("sharded", 3) == depth_of(sharded) == Depth(7, 0, 0, 0)
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()
    finally:
        worker.stop()


#: The stated bound (docs/admin.md): bytes a queue's depth samples cost over a month,
#: sampled every minute with nothing else counted.
DEPTH_BYTES_BOUND = 600_000


def test_a_month_of_depth_samples_stays_within_the_stated_bytes(
    redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "q")
    for n in range(1200):  # four-digit depths
        ledger.admit(f"r-{n}", "work", delay=0 if n % 2 else 3600)
    counters = Counters(redis_client, namespace)
    keys4 = counters.depth_keys("q")
    if isinstance(redis_client, RedisCluster):
        server = redis_client.get_redis_connection(redis_client.get_node_from_key(keys4[0]))
    else:
        server = redis_client
    server.function_load(library().source, replace=True)
    function = script("counters").function
    pipe = server.pipeline(transaction=False)
    for n, (minute, _) in enumerate(month_of_minutes()):  # samples: a max, not a sum
        keys = counters.add_keys(keys4[0], T0 + minute * MINUTE, keys4[1:])
        pipe.fcall(function, len(keys), *keys, 0, T0 + minute * MINUTE, 0, 1000)
        if n % 500 == 499:
            pipe.execute()
    pipe.execute()
    keys = list(redis_client.scan_iter(match=f"{{{namespace}:q}}:counts*", count=1000))
    assert len(keys) == 1440 + 720 + 2  # a day of minutes, 30 days of hours, two indexes
    used = sum(redis_client.memory_usage(k) or 0 for k in keys)
    print(f"depth samples, a month: {used} bytes in {len(keys)} keys")
    slot_lists = CLUSTER_BYTES_PER_KEY * len(keys) if isinstance(redis_client, RedisCluster) else 0
    assert used <= DEPTH_BYTES_BOUND + slot_lists, used


def test_the_prometheus_gauges_take_the_same_sample(
    redis_client: redis.Redis, namespace: str
) -> None:
    """``ledger_queue_depth`` and ``ledger_queue_records`` read what the chart draws."""
    import prometheus_client

    from django_ledger.core.worker.metrics import PrometheusMetrics

    registry = prometheus_client.CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    ledger = Ledger(redis_client, namespace, "emails")
    for n in range(3):
        ledger.admit(f"a-{n}", "work", delay=0 if n else 3600)
    assert ledger.claim("w", lease=60) is not None
    counters = Counters(redis_client, namespace)
    counters.on_sample = metrics.records
    counters.flush(Tally(), force=True, queues=["emails"])
    drawn = counters.read("emails").depth[-1]
    assert drawn == Depth(pending=2, due=1, claimed=1, dead=0)

    def gauge(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"queue": "emails", **labels})

    assert gauge("ledger_queue_depth") == drawn.pending
    assert gauge("ledger_queue_records", state="pending_due") == drawn.due
    assert gauge("ledger_queue_records", state="claimed") == drawn.claimed
    assert gauge("ledger_queue_records", state="dead") == drawn.dead
