"""Throughput of the core ledger beside raw Redis, measured in the same run.

Run from the repository root (see docs/performance.md for the figures and how):

    python -m benchmarks.core_bench                 # client and Redis float over the CPUs
    python -m benchmarks.core_bench --pin           # Redis on CPU 0, this client on CPU 1

It starts its own redis-server on a free port and stops it at the end. Every figure
is items (or calls) per second; each ledger figure is printed beside the raw-Redis
baseline that does the same writes with no ledger semantics:

* pipeline-128: a redis-py pipeline of 128 ``HSETNX`` + ``ZADD`` per item;
* evalsha-1: one ``EVALSHA`` per item of a script doing ``HSETNX`` + ``ZADD``;
* lua-128: one ``EVALSHA`` per 128 items of a script doing ``HSETNX`` + ``ZADD`` each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_ledger import MAX_BATCH, Ledger, State
from tests.redis_server import RedisServer

PAYLOAD = "x" * 200
RAW_ONE = "redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) redis.call('ZADD', KEYS[2], 0, ARGV[1]) return 1"
RAW_MANY = (
    "for i = 1, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) "
    "redis.call('ZADD', KEYS[2], 0, ARGV[i]) end return #ARGV / 2"
)


def rate(items: int, seconds: float) -> float:
    return items / seconds if seconds > 0 else float("inf")


def timed(work: Callable[[], int]) -> float:
    start = time.perf_counter()
    items = work()
    return rate(items, time.perf_counter() - start)


def evalsha_calls(client: object) -> int:
    stats = client.info("commandstats")  # type: ignore[attr-defined]
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def fresh(client: object, name: str, optimized: bool, n: int) -> Ledger:
    return Ledger(client, "bench", name, optimized=optimized, max_records=n * 4 + 1000)


def bench_raw(client: object, n: int) -> dict[str, float]:
    figures: dict[str, float] = {}

    def pipeline() -> int:
        for start in range(0, n, 128):
            pipe = client.pipeline(transaction=False)  # type: ignore[attr-defined]
            for i in range(start, min(n, start + 128)):
                pipe.hsetnx("raw:p:h", f"id{i:09d}", PAYLOAD)
                pipe.zadd("raw:p:z", {f"id{i:09d}": i})
            pipe.execute()
        return n

    one = client.register_script(RAW_ONE)  # type: ignore[attr-defined]
    many = client.register_script(RAW_MANY)  # type: ignore[attr-defined]

    def single() -> int:
        for i in range(n // 8):
            one(keys=["raw:s:h", "raw:s:z"], args=[f"id{i:09d}", PAYLOAD])
        return n // 8

    def batched() -> int:
        for start in range(0, n, 128):
            args: list[str] = []
            for i in range(start, min(n, start + 128)):
                args += (f"id{i:09d}", PAYLOAD)
            many(keys=["raw:m:h", "raw:m:z"], args=args)
        return n

    figures["pipeline-128"] = timed(pipeline)
    figures["evalsha-1"] = timed(single)
    figures["lua-128"] = timed(batched)
    client.delete("raw:p:h", "raw:p:z", "raw:s:h", "raw:s:z", "raw:m:h", "raw:m:z")  # type: ignore[attr-defined]
    return figures


def bench_ledger(
    client: object, optimized: bool, n: int
) -> tuple[dict[str, float], dict[str, float]]:
    mode = "opt" if optimized else "ref"
    figures: dict[str, float] = {}
    calls: dict[str, float] = {}
    single_n = n // 8 if optimized else n // 16
    ledger = fresh(client, f"{mode}-single", optimized, n)
    figures["admit"] = timed(
        lambda: sum(1 for i in range(single_n) if ledger.admit(f"s{i:011d}", PAYLOAD))
    )
    claims = []
    figures["claim"] = timed(
        lambda: len([claims.append(ledger.claim("w", 300)) for _ in range(single_n)])
    )
    figures["settle"] = timed(
        lambda: sum(1 for c in claims if c is not None and ledger.settle(c).ok)
    )

    many = fresh(client, f"{mode}-many", optimized, n)
    requests = [(f"m{i:011d}", PAYLOAD) for i in range(n)]
    before = evalsha_calls(client)

    def admit_many() -> int:
        for start in range(0, n, MAX_BATCH):
            many.admit_many(requests[start : start + MAX_BATCH])
        return n

    figures["admit_many"] = timed(admit_many)
    calls["admit_many"] = (evalsha_calls(client) - before) / (n / MAX_BATCH)
    got: list[object] = []
    before = evalsha_calls(client)

    def claim_many() -> int:
        while True:
            batch = many.claim_many("w", MAX_BATCH, 300)
            if not batch:
                return len(got)
            got.extend(batch)

    figures["claim_many"] = timed(claim_many)
    calls["claim_many"] = (evalsha_calls(client) - before) / (n / MAX_BATCH)
    before = evalsha_calls(client)

    def settle_many() -> int:
        for start in range(0, len(got), MAX_BATCH):
            many.settle_many([(c, State.COMPLETED) for c in got[start : start + MAX_BATCH]])  # type: ignore[misc]
        return len(got)

    figures["settle_many"] = timed(settle_many)
    calls["settle_many"] = (evalsha_calls(client) - before) / (n / MAX_BATCH)
    ids = [request_id for request_id, _ in requests]
    figures["resolve_many"] = timed(
        lambda: sum(len(many.resolve_many(ids[s : s + 1000])) for s in range(0, n, 1000))
    )

    def repair() -> int:
        return sum(report.scanned for report in many.repair_cycle(count=500))

    figures["repair"] = timed(repair)
    for key in many.keys + ledger.keys:
        client.delete(key)  # type: ignore[attr-defined]
    return figures, calls


def memory_ratio(client: object, n: int = 100_000) -> tuple[float, float, float]:
    """Return bytes per PENDING record for the ledger and for the bare baseline."""
    client.flushall()  # type: ignore[attr-defined]
    base = client.info("memory")["used_memory"]  # type: ignore[attr-defined]
    for start in range(0, n, 1000):
        pipe = client.pipeline(transaction=False)  # type: ignore[attr-defined]
        for i in range(start, start + 1000):
            pipe.hset("bare:h", f"id{i:010d}", PAYLOAD)
            pipe.zadd("bare:z", {f"id{i:010d}": 1764493200000 + i})
        pipe.execute()
    bare = (client.info("memory")["used_memory"] - base) / n  # type: ignore[attr-defined]
    client.flushall()  # type: ignore[attr-defined]
    base = client.info("memory")["used_memory"]  # type: ignore[attr-defined]
    ledger = Ledger(client, "mem", "q", max_records=n + 1)
    for start in range(0, n, MAX_BATCH):
        ledger.admit_many(
            [(f"id{i:010d}", PAYLOAD) for i in range(start, min(n, start + MAX_BATCH))]
        )
    ours = (client.info("memory")["used_memory"] - base) / n  # type: ignore[attr-defined]
    client.flushall()  # type: ignore[attr-defined]
    return ours, bare, ours / bare


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=40_000, help="items per batched figure")
    parser.add_argument("--pin", action="store_true", help="Redis on CPU 0, this client on CPU 1")
    args = parser.parse_args()
    server = RedisServer()
    server.start()
    if args.pin:
        assert server.pid is not None
        os.sched_setaffinity(server.pid, {0})
        os.sched_setaffinity(0, {1})
    try:
        client = server.client()
        print(
            f"redis-server {client.info('server')['redis_version']} on port {server.port}, n={args.n}, "
            f"pinned={args.pin}"
        )
        raw = bench_raw(client, args.n)
        print(
            "\nraw Redis baselines (items/s): " + ", ".join(f"{k} {v:,.0f}" for k, v in raw.items())
        )
        rows = []
        for optimized in (True, False):
            figures, calls = bench_ledger(client, optimized, args.n)
            rows.append((optimized, figures, calls))
        print(
            f"\n{'operation':<14}{'optimized/s':>14}{'reference/s':>14}{'baseline':>14}{'opt/base':>10}"
            f"{'calls/batch':>13}"
        )
        baseline_of = {
            "admit": "evalsha-1",
            "claim": "evalsha-1",
            "settle": "evalsha-1",
            "admit_many": "pipeline-128",
            "claim_many": "pipeline-128",
            "settle_many": "pipeline-128",
            "resolve_many": "pipeline-128",
            "repair": "pipeline-128",
        }
        opt, ref = rows[0][1], rows[1][1]
        for name, base_name in baseline_of.items():
            base = raw[base_name]
            per_call = rows[0][2].get(name)
            calls_text = f"{per_call:.2f}" if per_call is not None else ""
            print(
                f"{name:<14}{opt[name]:>14,.0f}{ref[name]:>14,.0f}{base_name:>14}{opt[name] / base:>10.2f}"
                f"{calls_text:>13}"
            )
        ours, bare, ratio = memory_ratio(client)
        print(
            f"\nmemory per PENDING record (200-byte payload, 12-char id): ledger {ours:.0f} B, "
            f"bare hash+zset {bare:.0f} B, ratio {ratio:.2f}"
        )
        client.close()
    finally:
        server.stop()
        server.cleanup()


if __name__ == "__main__":
    main()
