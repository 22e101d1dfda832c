"""What flow limits cost: limits that do not bind against none, and the claim's server time.

Run from the repository root with the project's interpreter (no peers needed):

    python3 -m benchmarks.limits_bench                 # 5 rounds, 10,000 tasks each
    python3 -m benchmarks.limits_bench --rounds 3 --tasks 5000 --no-workers

It starts its own redis-server on a free port (never 6379) and pins it to CPU 0 and
itself (and the worker processes it starts) to CPU 1. Three queues, the same no-op work:

* ``plain``: no limits;
* ``limited``: ``RATE`` 1,000,000,000 a second (burst the same) and ``CONCURRENCY``
  1,000,000,000: limits that never bind, so what is measured is their bookkeeping;
* ``keyed``: the same limits per key of ``kwargs.tenant_id``, over 100 tenants (every
  claim goes through keyed_claim.lua's pool and turns).

Two drains per queue per round, in an order that turns by one each round:

* **loop**: one thread of this process drains with ``claim_many`` then
  ``settle_and_claim`` (64 at a time): the ledger's own cost, no worker runtime;
* **worker**: ``manage.py ledger_worker QUEUE`` (concurrency 8, its defaults, ``-v 0``)
  in a process of its own; the rate is counted from the first task seen done to the
  last (start-up is not in it). A limited queue's worker prefetches from headroom only
  (docs/limits.md), which limits that never bind always leave; ``worker-p0`` drains
  ``plain`` with ``--prefetch 0`` too, what the worker costs without any prefetch.

Then the **claim script's server time**, from ``SLOWLOG`` (every call logged: the
``slowlog-log-slower-than 0`` setting) filtered on the claim script's SHA, for
``claim_many(8)`` calls that drain 10,000 records: unlimited; 1,000 keys with limits that
do not bind; and 1,000 keys each at a ``CONCURRENCY`` of 1 that binds (every key held:
each call looks through keys in turn until its budget, 8 * 4 + 64, runs out). Last, the
``settle_and_claim(64)`` script's server time, draining 10,000 records over 100 tenants,
by kind of limit (none binds): what each part of the limits costs the server.

``--pairs N`` runs only the worker drains of ``plain`` and ``limited``, back to back N
times (the order alternating), for a ratio of each pair under the same load.

``--after-old-keys N`` runs only the drain of new keys after old ones: a ``ledger_worker``
on ``keyed`` (its limits per key, none binding) runs N tasks of N distinct keys, then
``--new-keys`` tasks (default 2,000) of keys it has never seen, timed from their admission
to the last one done; against the same drain on a fresh queue (same worker start, one
warm-up task each), the order alternating each round. It prints the ratio (after old keys
/ fresh, 1.0: as fast), and the bytes of limits state (the limits hash and the keyed pool,
``MEMORY USAGE``) per old key after the drain: with the old tasks' records still kept (each
keeps its request's key until it is purged), and after they are purged.

The machine may be shared: prefer the ratios, printed against ``plain`` of the same
rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BIG = 1_000_000_000
QUEUES = ("plain", "limited", "keyed")
#: ``worker-p0``: ``plain`` under a worker with ``--prefetch 0`` (nothing held ahead):
#: what prefetch is worth, against which to read the limited queues' figures.
MODES = ("loop", "worker", "worker-p0")
TENANTS = 100


def _ledger(client: Any, namespace: str, name: str) -> Any:
    from django_ledger import Ledger
    from django_ledger.core.limits import Limits, Rate

    ledger = Ledger(client, namespace, name, max_records=10_000_000)
    if name == "limited":
        ledger.set_limits(Limits(Rate(BIG, 1000, BIG), BIG), source="settings")
    elif name == "keyed":
        ledger.set_limits(Limits(Rate(BIG, 1000, BIG), BIG, "kwargs.tenant_id"), source="settings")
    return ledger


def _admit(ledger: Any, n: int, tenants: int = TENANTS) -> None:
    ledger.admit_many(
        (f"t{i:07d}", json.dumps({"args": [], "kwargs": {"tenant_id": f"k{i % tenants}"}}))
        for i in range(n)
    )


def drain_loop(ledger: Any) -> float:
    """Drain the queue in this thread; answer tasks a second."""
    from django_ledger import State

    began = time.perf_counter()
    done = 0
    claims = ledger.claim_many("bench", 64)
    while claims:
        done += len(claims)
        _, claims = ledger.settle_and_claim([(c, State.COMPLETED, 0) for c in claims], "bench", 64)
    return done / (time.perf_counter() - began)


def drain_worker(
    url: str, namespace: str, name: str, n: int, logs: Path, extra: tuple[str, ...] = ()
) -> float:
    """Drain with a ``ledger_worker`` process; answer tasks a second, first done to last."""
    import redis

    env = {
        **os.environ,
        "REDIS_URL": url,
        "LEDGER_NAMESPACE": namespace,
        "DJANGO_SETTINGS_MODULE": "benchmarks.limits_bench_settings",
        "PYTHONPATH": str(ROOT),
    }
    client = redis.Redis.from_url(url)
    completed = f"{{{namespace}:{name}}}:completed"
    with (logs / f"{name}.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "ledger_worker", name, "-v", "0", "--no-repair", *extra],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            first = last = None
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                count = client.zcard(completed)
                now = time.perf_counter()
                if count and first is None:
                    first, first_count = now, count
                if count >= n:
                    last = now
                    break
                time.sleep(0.002)
            if first is None or last is None or last <= first:
                raise RuntimeError(f"{name}: the worker did not drain {n} tasks")
            return (n - first_count) / (last - first)
        finally:
            process.terminate()
            process.wait(30)


def claim_server_time(
    client: Any, ledger: Any, calls: Callable[[], int], function: str | None = None
) -> tuple[float, int]:
    """Run ``calls`` with every command in SLOWLOG; answer the median µs of the claim
    function's calls (or those of ``function``) and how many there were."""
    function = function or ledger.runner.scripts.claim.function
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1_000_000)
    client.slowlog_reset()
    calls()
    entries = client.slowlog_get(1_000_000)
    client.config_set("slowlog-log-slower-than", 10_000)
    times = [
        e["duration"]
        for e in entries
        if len(e["command"].split()) > 1
        and e["command"].split()[0].upper() == b"FCALL"
        and e["command"].split()[1].decode() == function
    ]
    return statistics.median(times), len(times)


def settle_and_claim_server_time(client: Any, rounds: int) -> dict[str, float]:
    """The median µs of ``settle_and_claim(64)`` calls draining 10,000 records over 100
    tenants, by kind of limit (none binds), median over ``rounds``."""
    from django_ledger import Ledger, State
    from django_ledger.core.limits import Limits, Rate

    key = "kwargs.tenant_id"
    kinds = {
        "no limits": None,
        "RATE and CONCURRENCY": Limits(Rate(BIG, 1000, BIG), BIG),
        "KEY alone (fair share)": Limits(key=key),
        "KEY, CONCURRENCY per key": Limits(None, BIG, key),
        "KEY, RATE per key": Limits(Rate(BIG, 1000, BIG), None, key),
        "KEY, both per key": Limits(Rate(BIG, 1000, BIG), BIG, key),
    }
    found: dict[str, list[float]] = {}
    for _ in range(rounds):
        for label, limits in kinds.items():
            client.flushall()
            ledger = Ledger(client, "bench", "q", max_records=10_000_000)
            if limits is not None:
                ledger.set_limits(limits, source="settings")
            _admit(ledger, 10_000)

            def drain(ledger: Any = ledger) -> int:
                claims = ledger.claim_many("bench", 64)
                while claims:
                    _, claims = ledger.settle_and_claim(
                        [(c, State.COMPLETED, 0) for c in claims], "bench", 64
                    )
                return 0

            median, _ = claim_server_time(
                client, ledger, drain, function=ledger.runner.scripts.settle_claim.function
            )
            found.setdefault(label, []).append(median)
    return {label: statistics.median(values) for label, values in found.items()}


def claim_all(ledger: Any) -> Callable[[], int]:
    def run() -> int:
        n = 0
        while True:
            got = ledger.claim_many("bench", 8, lease=600)
            n += len(got)
            if not got:
                return n

    return run


def held_calls(ledger: Any, calls: int) -> Callable[[], int]:
    def run() -> int:
        for _ in range(calls):
            ledger.claim_many("bench", 8, lease=600)
        return calls

    return run


def worker_pairs(url: str, client: Any, pairs: int, tasks: int, logs: Path) -> int:
    """Drain ``plain`` and ``limited`` with a worker, back to back, ``pairs`` times (the
    order alternating): each pair's ratio is measured under the same load."""
    ratios: list[float] = []
    rates: dict[str, list[float]] = {"plain": [], "limited": []}
    for number in range(pairs):
        order = ("plain", "limited") if number % 2 == 0 else ("limited", "plain")
        got: dict[str, float] = {}
        for name in order:
            client.flushall()
            _admit(_ledger(client, "bench", name), tasks)
            got[name] = drain_worker(url, "bench", name, tasks, logs)
            rates[name].append(got[name])
        ratios.append(got["limited"] / got["plain"])
        print(
            f"  pair {number + 1:2} plain {got['plain']:6.0f}  limited {got['limited']:6.0f} "
            f"tasks/s  x{ratios[-1]:.3f}",
            flush=True,
        )
    print(
        f"\nworker drain, {pairs} pairs: plain {statistics.median(rates['plain']):.0f}, "
        f"limited {statistics.median(rates['limited']):.0f} tasks/s (medians); limited / "
        f"plain median x{statistics.median(ratios):.3f} (quartiles "
        f"{' '.join(f'{q:.3f}' for q in statistics.quantiles(ratios, n=4))})"
    )
    return 0


def _admit_keys(ledger: Any, prefix: str, n: int) -> None:
    """Admit ``n`` tasks, each of a key of its own."""
    ledger.admit_many(
        (f"{prefix}{i:07d}", json.dumps({"args": [], "kwargs": {"tenant_id": f"{prefix}{i}"}}))
        for i in range(n)
    )


def _wait_completed(client: Any, key: str, n: int, what: str) -> None:
    deadline = time.monotonic() + 600
    while client.zcard(key) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not complete {what}")
        time.sleep(0.002)


def drain_after_old_keys(
    url: str, client: Any, old: int, new: int, logs: Path
) -> tuple[float, int, int, int]:
    """One worker drain of ``new`` tasks of new keys after ``old`` tasks of other keys (0:
    a fresh queue): answer tasks a second from their admission to the last done, the
    bytes of limits state after it, with the old records kept and after their purge, and
    how many old keys still hold some of it."""
    from datetime import timedelta

    from django_ledger import Ledger

    client.flushall()
    ledger = _ledger(client, "bench", "keyed")
    completed = "{bench:keyed}:completed"
    env = {
        **os.environ,
        "REDIS_URL": url,
        "LEDGER_NAMESPACE": "bench",
        "DJANGO_SETTINGS_MODULE": "benchmarks.limits_bench_settings",
        "PYTHONPATH": str(ROOT),
    }
    with (logs / "keyed-old-keys.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "ledger_worker", "keyed", "-v", "0", "--no-repair"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _admit_keys(ledger, "warm", 1)  # the worker is up and claiming
            _wait_completed(client, completed, 1, "the warm-up task")
            if old:
                _admit_keys(ledger, "old", old)
                _wait_completed(client, completed, 1 + old, f"{old} old tasks")
            began = time.perf_counter()
            _admit_keys(ledger, "new", new)
            _wait_completed(client, completed, 1 + old + new, f"{new} new tasks")
            rate = new / (time.perf_counter() - began)
        finally:
            process.terminate()
            process.wait(30)
    keys = (ledger.runner.keys[11], ledger.runner.keys[13])

    def state() -> int:
        return sum(client.memory_usage(k, samples=0) or 0 for k in keys)

    kept = state()
    purger = Ledger(client, "bench", "keyed", retention=timedelta(0), max_records=10_000_000)
    cursor = purger.repair("0", 1000)
    while cursor != "0":
        cursor = purger.repair(cursor, 1000)
    # The old keys that still hold anything: a limits field or a pool entry naming them.
    named = [f for f in client.hkeys(keys[0]) if b"old" in f]
    named += [m for m in client.zrange(keys[1], 0, -1) if b"old" in m]
    return rate, kept, state(), len({bytes(c for c in n if 48 <= c <= 57) for n in named})


def old_keys_rounds(url: str, client: Any, rounds: int, old: int, new: int, logs: Path) -> int:
    """``--after-old-keys``: rounds of a fresh drain and one after ``old`` keys, alternating."""
    ratios: list[float] = []
    rates: dict[str, list[float]] = {"fresh": [], "old": []}
    kept: list[float] = []
    purged: list[float] = []
    holding: list[int] = []
    for number in range(rounds):
        order = ("fresh", "old") if number % 2 == 0 else ("old", "fresh")
        got: dict[str, float] = {}
        states: dict[str, tuple[int, int]] = {}
        for kind in order:
            rate, state_kept, state_purged, left = drain_after_old_keys(
                url, client, old if kind == "old" else 0, new, logs
            )
            got[kind] = rate
            rates[kind].append(rate)
            states[kind] = (state_kept, state_purged)
            if kind == "old":
                holding.append(left)
        # The state the old keys left: beyond the fresh queue's, which saw the same new keys.
        kept.append((states["old"][0] - states["fresh"][0]) / old)
        purged.append((states["old"][1] - states["fresh"][1]) / old)
        ratios.append(got["old"] / got["fresh"])
        print(
            f"  round {number + 1:2} fresh {got['fresh']:6.0f}  after {old:,} keys "
            f"{got['old']:6.0f} tasks/s  x{ratios[-1]:.3f}   limits state per old key: "
            f"{kept[-1]:.1f} B (records kept), {purged[-1]:.1f} B (purged); old keys "
            f"holding any: {holding[-1]}",
            flush=True,
        )
    print(
        f"\nnew keys' drain after {old:,} old keys / fresh: median x{statistics.median(ratios):.3f}"
        f" (min {min(ratios):.3f}); fresh {statistics.median(rates['fresh']):.0f}, after old "
        f"{statistics.median(rates['old']):.0f} tasks/s (medians)\n"
        f"limits state per old key after the drain: {statistics.median(kept):.1f} B with "
        f"the old records kept, {statistics.median(purged):.1f} B once they are purged "
        f"(beyond a fresh queue's after the same new keys); old keys still holding any: "
        f"{max(holding)} of {old:,} at most"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--no-workers", action="store_true", help="the loop drain only")
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument(
        "--server-time-only", action="store_true", help="the claim script's server time only"
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="only worker drains: N rounds of plain and limited back to back (the order "
        "alternating), and the median of the per-round ratios",
    )
    parser.add_argument(
        "--after-old-keys",
        type=int,
        default=0,
        metavar="N",
        help="only the drain of new keys after N old keys against a fresh queue's",
    )
    parser.add_argument("--new-keys", type=int, default=2000)
    args = parser.parse_args()

    from tests.support.redis_server import RedisServer

    server = RedisServer()
    server.start()
    if args.pin:
        assert server.pid is not None
        os.sched_setaffinity(server.pid, {0})
        os.sched_setaffinity(0, {1})
    logs = Path(f"/tmp/limits-bench-{os.getpid()}")
    logs.mkdir(parents=True, exist_ok=True)
    client = server.client()
    try:
        print(
            f"redis-server {client.info('server')['redis_version']}, tasks={args.tasks}, "
            f"rounds={args.rounds}, pinned={args.pin}, python {sys.version.split()[0]}"
        )
        if args.pairs:
            return worker_pairs(server.url, client, args.pairs, args.tasks, logs)
        if args.after_old_keys:
            return old_keys_rounds(
                server.url, client, args.rounds, args.after_old_keys, args.new_keys, logs
            )
        rates: dict[tuple[str, str], list[float]] = {}
        for round_number in range(0 if args.server_time_only else args.rounds):
            turn = round_number % len(QUEUES)
            for name in QUEUES[turn:] + QUEUES[:turn]:
                for mode in MODES:
                    if (mode != "loop" and args.no_workers) or (
                        mode == "worker-p0" and name != "plain"
                    ):
                        continue
                    client.flushall()
                    ledger = _ledger(client, "bench", name)
                    _admit(ledger, args.tasks)
                    if mode == "loop":
                        rate = drain_loop(ledger)
                    else:
                        extra = ("--prefetch", "0") if mode == "worker-p0" else ()
                        rate = drain_worker(server.url, "bench", name, args.tasks, logs, extra)
                    rates.setdefault((mode, name), []).append(rate)
                    print(f"  round {round_number + 1} {mode:6} {name:8} {rate:9.0f} tasks/s")
        if rates:
            print("\ndrain rate, median of rounds (ratio to plain in the same rounds):")
        for mode in MODES:
            base = rates.get((mode if mode != "worker-p0" else "worker", "plain"))
            if not base:
                continue
            for name in QUEUES:
                if (mode, name) not in rates:
                    continue
                med = statistics.median(rates[(mode, name)])
                ratios = [r / b for r, b in zip(rates[(mode, name)], base, strict=True)]
                print(
                    f"  {mode:6} {name:8} {med:9.0f} tasks/s  "
                    f"x{statistics.median(ratios):.3f} of plain"
                )

        print("\nclaim script server time (SLOWLOG, median µs per claim_many(8) call):")
        scenarios: list[tuple[str, str, int, Any]] = [
            ("unlimited, 10,000 records", "plain", 1, None),
            ("1,000 keys, limits that do not bind", "keyed", 1000, None),
            ("1,000 keys at CONCURRENCY 1, all held", "held", 1000, 1),
        ]
        for label, kind, tenants, _ in scenarios:
            client.flushall()
            from django_ledger.core.limits import Limits

            ledger = _ledger(client, "bench", "keyed" if kind == "held" else kind)
            if kind == "held":
                ledger.set_limits(Limits(None, 1, "kwargs.tenant_id"), source="settings")
            _admit(ledger, 10_000, tenants)
            if kind == "held":
                claim_all(ledger)()  # one claim per key: every key is at its limit now
                median, calls = claim_server_time(client, ledger, held_calls(ledger, 500))
            else:
                median, calls = claim_server_time(client, ledger, claim_all(ledger))
            print(f"  {label:40} {median:7.0f} µs  ({calls} calls)")

        print("\nsettle_and_claim(64) server time, 100 tenants (SLOWLOG, median µs per call):")
        found = settle_and_claim_server_time(client, max(1, min(args.rounds, 3)))
        base = found["no limits"]
        for label, median in found.items():
            print(f"  {label:40} {median:7.0f} µs  x{median / base:.2f}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
