"""One busy queue on a 3-master Redis Cluster: 1 shard against 3 shards, 1 to 3 clients.

Run from the repository root (docs/cluster.md holds the figures and how they were made):

    python -m benchmarks.cluster_bench                  # 6,000 records per figure, 3 rounds
    python -m benchmarks.cluster_bench -n 12000 --rounds 5 --batch 32

It starts its own cluster (three masters, no replicas, ``redis-cli --cluster create``
on free ports, as the test suite does) and stops it at the end. Each figure is one queue
(``SHARDS`` 1, or 3 with one shard on each master) holding ``-n`` due records, drained by
``C`` client processes at once, each looping the worker's hot path: ``settle_and_claim``
of its last batch and up to ``--batch`` more (one script call per batch on one shard).
It prints records per second (the median over rounds; each round runs every figure, in
an order that alternates), the ratio of 3 shards to 1 shard with the same clients, and
where the CPU went: milliseconds of CPU the three masters used (``INFO cpu``) and the
clients used, per 1,000 records, and how many of the machine's CPUs were busy over the
wall time (``/proc/stat``, every process).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import uuid
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_ledger import Ledger, State
from django_ledger.core.sharded import ShardedLedger
from tests.support.cluster_server import LocalCluster

PAYLOAD = "x" * 200
NAMESPACE = "bench"


def build(client: Any, queue: str, shards: int) -> Ledger:
    options = {"max_records": 10_000_000, "max_retained": 10_000_000}
    if shards == 1:
        return Ledger(client, NAMESPACE, queue, **options)  # type: ignore[arg-type]
    return ShardedLedger(client, NAMESPACE, queue, shards, **options)  # type: ignore[arg-type]


def drain(nodes: list[str], queue: str, shards: int, batch: int, start: Any, done: Any) -> None:
    """One client process: settle-and-claim until the queue has nothing due."""
    from redis.cluster import ClusterNode, RedisCluster

    client = RedisCluster(
        startup_nodes=[ClusterNode(*n.rsplit(":", 1)) for n in nodes], decode_responses=False
    )
    ledger = build(client, queue, shards)
    owner = f"client-{os.getpid()}"
    ledger.stats()  # connections to every master made before the clock starts
    start.wait()
    before = time.process_time()
    claims = ledger.claim_many(owner, batch)
    count = 0
    while claims:
        count += len(claims)
        _, claims = ledger.settle_and_claim(
            [(claim, State.COMPLETED) for claim in claims], owner, batch
        )
    done.put((count, time.process_time() - before))
    client.close()


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat (Linux)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0, 0.0
    ticks = [int(f) for f in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - idle) / hz, sum(ticks) / hz


def masters_cpu(cluster: LocalCluster) -> float:
    total = 0.0
    for master in cluster.masters():
        with master.client() as client:
            info = client.info("cpu")
        total += float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    return total


def figure(
    cluster: LocalCluster, shards: int, clients: int, n: int, batch: int
) -> tuple[float, float, float, float]:
    """Drain ``n`` records with ``clients`` processes.

    Returns records/s, the masters' CPU seconds, the clients' CPU seconds, and the
    machine's CPUs busy over the wall time (all processes, from /proc/stat).
    """
    queue = f"q{uuid.uuid4().hex[:10]}"
    with cluster.client() as client:
        ledger = build(client, queue, shards)
        for first in range(0, n, 1000):
            ledger.admit_many((f"r{i}", PAYLOAD) for i in range(first, min(n, first + 1000)))
    context = multiprocessing.get_context("fork")
    start, done = context.Event(), context.Queue()
    workers = [
        context.Process(
            target=drain, args=(cluster.startup_nodes, queue, shards, batch, start, done)
        )
        for _ in range(clients)
    ]
    for worker in workers:
        worker.start()
    time.sleep(1.0)  # let every client connect (outside the timed part)
    cpu_before, (busy_before, _) = masters_cpu(cluster), machine_busy()
    began = time.perf_counter()
    start.set()
    results = [done.get(timeout=600) for _ in workers]
    wall = time.perf_counter() - began
    busy = (machine_busy()[0] - busy_before) / wall
    redis_cpu = masters_cpu(cluster) - cpu_before
    for worker in workers:
        worker.join(30)
    drained = sum(count for count, _ in results)
    if drained != n:
        raise SystemExit(f"{drained} of {n} records claimed: the figure is wrong")
    with cluster.client() as client:
        for shard in build(client, queue, shards).shards:
            client.delete(*shard.keys)
    return n / wall, redis_cpu, sum(cpu for _, cpu in results), busy


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=6000, help="records per figure and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians)")
    parser.add_argument("--batch", type=int, default=32, help="claims per settle_and_claim")
    options = parser.parse_args()
    configs = [(shards, clients) for clients in (1, 2, 3) for shards in (1, 3)]
    rates: dict[tuple[int, int], list[float]] = {c: [] for c in configs}
    cpu: dict[tuple[int, int], list[tuple[float, float, float]]] = {c: [] for c in configs}
    with LocalCluster(3) as cluster:
        with cluster.client() as client:
            masters = {build(client, "probe", 3).shards[i].runner.placement()[1] for i in range(3)}
        print(
            f"cluster: 3 masters, no replicas; a 3-shard queue's shards on {len(masters)} masters"
        )
        print(f"{os.cpu_count()} CPUs; {options.n} records per figure, batches of {options.batch}")
        for round_number in range(options.rounds):
            order = configs if round_number % 2 == 0 else configs[::-1]
            for config in order:
                rate, redis_cpu, client_cpu, busy = figure(
                    cluster, *config, options.n, options.batch
                )
                rates[config].append(rate)
                cpu[config].append((redis_cpu, client_cpu, busy))
                print(
                    f"  round {round_number + 1}: shards={config[0]} clients={config[1]}: "
                    f"{rate:,.0f} records/s, machine {busy:.2f} of {os.cpu_count()} CPUs busy",
                    flush=True,
                )
    print()
    print(
        "| clients | 1 shard rec/s | 3 shards rec/s | 3 / 1 | ratio per round | "
        "masters' CPU ms / 1k (1 → 3) | clients' CPU ms / 1k (1 → 3) | "
        "machine CPUs busy (1 → 3) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for clients in (1, 2, 3):
        one, three = rates[(1, clients)], rates[(3, clients)]
        per_round = ", ".join(f"{b / a:.2f}" for a, b in zip(one, three, strict=True))

        def usage(shards: int, clients: int = clients) -> tuple[float, float, float]:
            rows = cpu[(shards, clients)]
            redis_s = median(r for r, _, _ in rows) / options.n * 1e6
            client_s = median(c for _, c, _ in rows) / options.n * 1e6
            busy = median(b for _, _, b in rows)
            return redis_s, client_s, busy

        (r1, c1, b1), (r3, c3, b3) = usage(1), usage(3)
        print(
            f"| {clients} | {median(one):,.0f} | {median(three):,.0f} | "
            f"{median(three) / median(one):.2f} | {per_round} | {r1:.0f} → {r3:.0f} | "
            f"{c1:.0f} → {c3:.0f} | {b1:.2f} → {b3:.2f} |"
        )


if __name__ == "__main__":
    main()
