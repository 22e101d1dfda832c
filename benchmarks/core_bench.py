"""Throughput of the core ledger beside raw Redis, measured in the same run.

Run from the repository root (see docs/performance.md for the figures and how):

    python -m benchmarks.core_bench                 # client and Redis float over the CPUs
    python -m benchmarks.core_bench --pin           # Redis on CPU 0, this client on CPU 1
    python -m benchmarks.core_bench --pin --roads   # single calls: redis-py's path or a scope
    git show main:django_ledger/core/lane.py > /tmp/old_lane.py
    python -m benchmarks.core_bench --pin --roads --old-lane /tmp/old_lane.py  # and main's lane

It starts its own redis-server on a free port and stops it at the end. Every figure
is items (or calls) per second; each ledger figure is printed beside the raw-Redis
baseline that does the same writes with no ledger semantics:

* pipeline-admit: redis-py pipelines of 128 items, ``HSETNX`` + ``ZADD`` per item (the
  writes of an admission);
* pipeline-claim and pipeline-settle: pipelines of 128 items, ``HSET`` of a 250-byte
  record + ``ZREM`` from one index + ``ZADD`` to another per item (the writes of a claim,
  of a settlement);
* pipeline-read: pipelines of 128 ``HGET`` (the reads of ``resolve_many``);
* evalsha-1: one ``EVALSHA`` per item of a script doing ``HSETNX`` + ``ZADD``, beside the
  single-item operations;
* lua-128: one ``EVALSHA`` per 128 items of a script doing ``HSETNX`` + ``ZADD`` each
  (what a fused script could do with no checks at all).

The ledger's figures are taken inside ``lane.borrowed(client)``, as a bulk loop or a
worker makes its calls. ``--roads`` instead times single calls (admit, claim, settle)
on redis-py's plain path (no scope) and in a scope, alternating, in µs of client CPU
and of wall time per call. Repair is shown beside pipeline-admit. The ledger and the baselines alternate round by
round; the table shows medians of the rates and of the per-round ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_ledger import MAX_BATCH, Ledger, State
from django_ledger.core.lane import borrowed
from tests.support.redis_server import RedisServer

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


def ledger_calls(client: Any) -> int:
    """The ledger's calls so far: its functions' (``FCALL``)."""
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_fcall", {}).get("calls", 0))


def fresh(client: object, name: str, optimized: bool, n: int) -> Ledger:
    return Ledger(client, "bench", name, optimized=optimized, max_records=n * 4 + 1000)


def bench_raw(client: Any, n: int) -> dict[str, float]:
    """Time the raw-Redis baselines: the same writes (and reads) with no ledger in between."""
    record = "r" * 250  # about the size of a stored record with a 200-byte payload
    ids = [f"id{i:09d}" for i in range(n)]

    def pipeline(commands: Callable[[Any, str], None]) -> Callable[[], int]:
        def run() -> int:
            for start in range(0, n, 128):
                pipe = client.pipeline(transaction=False)
                for request_id in ids[start : start + 128]:
                    commands(pipe, request_id)
                pipe.execute()
            return n

        return run

    def admit(pipe: Any, request_id: str) -> None:
        pipe.hsetnx("raw:h", request_id, PAYLOAD)
        pipe.zadd("raw:ready", {request_id: 1})

    def claim(pipe: Any, request_id: str) -> None:
        pipe.hset("raw:h", request_id, record)
        pipe.zrem("raw:ready", request_id)
        pipe.zadd("raw:leases", {request_id: 2})

    def settle(pipe: Any, request_id: str) -> None:
        pipe.hset("raw:h", request_id, record)
        pipe.zrem("raw:leases", request_id)
        pipe.zadd("raw:done", {request_id: 3})

    def read(pipe: Any, request_id: str) -> None:
        pipe.hget("raw:h", request_id)

    one = client.register_script(RAW_ONE)
    many = client.register_script(RAW_MANY)

    def single() -> int:
        for request_id in ids[: n // 8]:
            one(keys=["raw:s:h", "raw:s:z"], args=[request_id, PAYLOAD])
        return n // 8

    def batched() -> int:
        for start in range(0, n, 128):
            args: list[str] = []
            for request_id in ids[start : start + 128]:
                args += (request_id, PAYLOAD)
            many(keys=["raw:m:h", "raw:m:z"], args=args)
        return n

    figures = {
        "pipeline-admit": timed(pipeline(admit)),
        "pipeline-claim": timed(pipeline(claim)),
        "pipeline-settle": timed(pipeline(settle)),
        "pipeline-read": timed(pipeline(read)),
        "evalsha-1": timed(single),
        "lua-128": timed(batched),
    }
    client.delete(
        "raw:h", "raw:ready", "raw:leases", "raw:done", "raw:s:h", "raw:s:z", "raw:m:h", "raw:m:z"
    )
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
    before = ledger_calls(client)

    def admit_many() -> int:
        for start in range(0, n, MAX_BATCH):
            many.admit_many(requests[start : start + MAX_BATCH])
        return n

    figures["admit_many"] = timed(admit_many)
    calls["admit_many"] = (ledger_calls(client) - before) / (n / MAX_BATCH)
    got: list[object] = []
    before = ledger_calls(client)

    def claim_many() -> int:
        while True:
            batch = many.claim_many("w", MAX_BATCH, 300)
            if not batch:
                return len(got)
            got.extend(batch)

    figures["claim_many"] = timed(claim_many)
    calls["claim_many"] = (ledger_calls(client) - before) / (n / MAX_BATCH)
    before = ledger_calls(client)

    def settle_many() -> int:
        for start in range(0, len(got), MAX_BATCH):
            many.settle_many([(c, State.COMPLETED) for c in got[start : start + MAX_BATCH]])  # type: ignore[misc]
        return len(got)

    figures["settle_many"] = timed(settle_many)
    calls["settle_many"] = (ledger_calls(client) - before) / (n / MAX_BATCH)
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


def _old_lane_road(client: Any, path: str) -> Callable[[], Any]:
    """A road through the lane of ``path`` (git's main ``core/lane.py``): for comparison."""
    import importlib.util

    from django_ledger.core import runner

    spec = importlib.util.spec_from_file_location("old_lane", path)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    old.WARM_CALLS = 0
    lane = old.lane_for(client)
    assert lane is not None, "the old lane cannot serve this client"

    class Adapter:
        def call(self, name: str, command: tuple[Any, ...], slot: int = 0) -> Any:
            reply = lane.call(command)
            return runner.MISSED if reply is old.MISSED else reply

    adapter = Adapter()

    @contextlib.contextmanager
    def road() -> Iterator[None]:
        saved = runner.current
        runner.current = lambda redis: adapter  # type: ignore[assignment]
        try:
            yield
        finally:
            runner.current = saved
            lane.drop()

    return road


def bench_roads(client: Any, n: int, rounds: int, old_lane: str | None) -> None:
    """Print µs per single call (client CPU, wall) on redis-py's plain path and in a scope.

    With ``old_lane``, also through that file's lane (git's main), in the same rounds.
    """
    ledger = fresh(client, "roads", True, n)
    ledger.admit("warm", PAYLOAD)  # loads the scripts
    roads: dict[str, Callable[[], Any]] = {
        "plain": contextlib.nullcontext,
        "scope": lambda: borrowed(client),
    }
    if old_lane:
        roads["old lane"] = _old_lane_road(client, old_lane)
    seen: dict[str, dict[str, list[tuple[float, float]]]] = {road: {} for road in roads}

    def one_round(road: str, tag: str) -> None:
        def timed_us(name: str, work: Callable[[], int]) -> None:
            cpu, wall = time.process_time(), time.perf_counter()
            count = work()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            seen[road].setdefault(name, []).append((cpu / count * 1e6, wall / count * 1e6))

        claims: list[Any] = []
        timed_us("admit", lambda: sum(1 for i in range(n) if ledger.admit(f"{tag}{i}", PAYLOAD)))
        timed_us("claim", lambda: len([claims.append(ledger.claim("w", 300)) for _ in range(n)]))
        timed_us("settle", lambda: sum(1 for c in claims if c is not None and ledger.settle(c).ok))

    for r in range(rounds):
        for road, enter in roads.items():
            with enter():
                one_round(road, f"{road}{r}-")
    print(f"\nsingle calls, µs of client CPU per call, {rounds} rounds of {n}: min (median)")
    print(f"{'operation':<10}" + "".join(f"{road:>18}" for road in roads))
    for name in ("admit", "claim", "settle"):
        cells = []
        for road in roads:
            cpu = [c for c, _ in seen[road][name]]
            cells.append(f"{min(cpu):>8.1f} ({median(cpu):>6.1f})")
        print(f"{name:<10}" + "".join(f"{cell:>18}" for cell in cells))
    print(
        "wall µs per call, median: "
        + ", ".join(
            f"{road} "
            + "/".join(f"{median(w for _, w in seen[road][name]):.0f}" for name in seen[road])
            for road in roads
        )
    )
    for key in ledger.keys:
        client.delete(key)


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


BASELINE_OF = {
    "admit": "evalsha-1",
    "claim": "evalsha-1",
    "settle": "evalsha-1",
    "admit_many": "pipeline-admit",
    "claim_many": "pipeline-claim",
    "settle_many": "pipeline-settle",
    "resolve_many": "pipeline-read",
    "repair": "pipeline-admit",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=20_000, help="items per batched figure")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (medians)")
    parser.add_argument("--pin", action="store_true", help="Redis on CPU 0, this client on CPU 1")
    parser.add_argument(
        "--roads", action="store_true", help="only single calls: redis-py's path and a scope"
    )
    parser.add_argument(
        "--old-lane", metavar="FILE", help="with --roads: also through this lane.py (git's main)"
    )
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
            f"redis-server {client.info('server')['redis_version']} on port {server.port}, "
            f"n={args.n}, rounds={args.rounds}, pinned={args.pin}"
        )
        if args.roads:
            bench_roads(client, max(args.n // 8, 100), args.rounds, args.old_lane)
            return
        # Baseline and ledger alternate round by round, so a slow spell of this shared
        # machine weighs on both sides of a ratio; the table shows medians.
        raws: list[dict[str, float]] = []
        opts: list[dict[str, float]] = []
        calls: dict[str, float] = {}
        for _ in range(args.rounds):
            raws.append(bench_raw(client, args.n))
            with borrowed(client):  # as a bulk loop or a worker makes its calls
                figures, calls = bench_ledger(client, True, args.n)
            opts.append(figures)
        with borrowed(client):
            ref, _ = bench_ledger(client, False, max(args.n // 10, 1000))
        raw = {name: median(r[name] for r in raws) for name in raws[0]}
        print(
            "\nraw Redis baselines, median items/s: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in raw.items())
        )
        print(
            f"\n{'operation':<14}{'optimized/s':>14}{'reference/s':>14}{'baseline':>16}"
            f"{'opt/base':>10}{'calls/batch':>13}"
        )
        for name, base_name in BASELINE_OF.items():
            ratio = median(o[name] / r[base_name] for o, r in zip(opts, raws, strict=True))
            per_call = calls.get(name)
            calls_text = f"{per_call:.2f}" if per_call is not None else ""
            print(
                f"{name:<14}{median(o[name] for o in opts):>14,.0f}{ref[name]:>14,.0f}"
                f"{base_name:>16}{ratio:>10.2f}{calls_text:>13}"
            )
        ours, bare, mem_ratio = memory_ratio(client)
        print(
            f"\nmemory per PENDING record (200-byte payload, 12-char id): ledger {ours:.0f} B, "
            f"bare hash+zset {bare:.0f} B, ratio {mem_ratio:.2f}"
        )
        client.close()
    finally:
        server.stop()
        server.cleanup()


if __name__ == "__main__":
    main()
