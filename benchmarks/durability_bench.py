"""What ``LEDGER['DURABILITY']`` costs: the ledger's rates with and without ``WAIT``.

Run from the repository root (docs/cluster.md holds the figures and how they were made):

    python -m benchmarks.durability_bench                 # 2,000 operations per figure
    python -m benchmarks.durability_bench -n 5000 --rounds 5

It starts its own servers on free ports and stops them at the end: a standalone master
with one replica, and a Redis Cluster of three masters with one replica each (formed by
``redis-cli --cluster create``, as the test suite does). On each it times, with
``durability_replicas`` 0 (no WAIT) and 1 (WAIT 1 after every write), on one client:

* admit-1: ``admit`` of one request per call (one script call each);
* admit-128: ``admit_many`` of 128 requests per call (one script call per batch);
* claim+settle: ``claim`` then ``settle`` of one record (two script calls);

and prints operations (requests for admit-128) per second, medians of ``--rounds``
rounds that alternate between the two settings, with the ratio of each round.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_ledger import Ledger
from tests.support.cluster_server import LocalCluster
from tests.support.redis_server import RedisServer

PAYLOAD = "x" * 200
WAIT_MS = 5000


def admit_one(ledger: Ledger, n: int) -> int:
    for i in range(n):
        ledger.admit(f"one-{i}", PAYLOAD)
    return n


def admit_many(ledger: Ledger, n: int) -> int:
    for first in range(0, n, 128):
        ledger.admit_many((f"many-{i}", PAYLOAD) for i in range(first, min(n, first + 128)))
    return n


def claim_settle(ledger: Ledger, n: int) -> int:
    ledger.admit_many((f"work-{i}", PAYLOAD) for i in range(n))
    done = 0
    while done < n:
        claim = ledger.claim("bench")
        if claim is None:
            break
        ledger.settle(claim)
        done += 1
    return done


FIGURES: list[tuple[str, Callable[[Ledger, int], int]]] = [
    ("admit-1", admit_one),
    ("admit-128", admit_many),
    ("claim+settle", claim_settle),
]


def rate_of(client: Any, replicas: int, figure: Callable[[Ledger, int], int], n: int) -> float:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    ledger = Ledger(
        client, "durability", queue, durability_replicas=replicas, durability_timeout_ms=WAIT_MS
    )
    start = time.perf_counter()
    done = figure(ledger, n)
    seconds = time.perf_counter() - start
    client.delete(*ledger.keys)
    return done / seconds


def measure(name: str, client: Any, n: int, rounds: int) -> None:
    print(f"\n{name}")
    print(f"{'figure':<14} {'no WAIT /s':>12} {'WAIT 1 /s':>12} {'WAIT / none':>12}")
    for label, figure in FIGURES:
        plain: list[float] = []
        waited: list[float] = []
        ratios: list[float] = []
        for _ in range(rounds):
            plain.append(rate_of(client, 0, figure, n))
            waited.append(rate_of(client, 1, figure, n))
            ratios.append(waited[-1] / plain[-1])
        print(
            f"{label:<14} {median(plain):>12,.0f} {median(waited):>12,.0f} {median(ratios):>12.2f}"
        )


def wait_for_replica(master: RedisServer, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with master.client() as client:
        while int(client.info("replication")["connected_slaves"]) < 1:
            if time.monotonic() > deadline:
                raise SystemExit("the replica never connected")
            time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=2000, help="operations per figure and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians)")
    options = parser.parse_args()

    master = RedisServer(extra_args=["--repl-diskless-sync-delay", "0"])
    master.start()
    replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(master.port)])
    try:
        replica.start()
        wait_for_replica(master)
        with master.client() as client:
            measure("standalone master + 1 replica", client, options.n, options.rounds)
    finally:
        replica.cleanup()
        master.cleanup()
    with LocalCluster(3, replicas=1) as cluster, cluster.client() as client:
        measure("cluster: 3 masters + 1 replica each", client, options.n, options.rounds)


if __name__ == "__main__":
    main()
