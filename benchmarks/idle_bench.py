"""What an idle worker asks of Redis: every command Redis runs for it, scripts' included.

Run from the repository root (docs/performance.md, "An idle worker's upkeep"):

    python3 -m benchmarks.idle_bench                    # 1,000 ended records, 20 s
    python3 -m benchmarks.idle_bench --records 20000 --seconds 60

It starts its own redis-server on a free port, fills the raw ``bench`` queue of
``tests.support.bench_settings`` with ``--records`` records that have all run (admitted,
claimed and settled COMPLETED through the core ``Ledger``), and starts one ``manage.py
ledger_worker bench`` with its defaults (repair on, a 30 s lease: a repair page every 5
s). It waits until the worker's first repair pass over those records has ended (no
``HSCAN`` for two repair intervals; at most ``--warmup`` seconds), then resets ``INFO
commandstats`` and counts, over ``--seconds``, what Redis ran: the commands the worker
sent and those its scripts ran. Nothing else uses that server meanwhile.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.worker_bench import ROOT, _calls, _django_env, _ledger
from tests.support.redis_server import RedisServer

#: The worker's repair interval with the bench queue's 30 s lease (a sixth, at most 5 s).
INTERVAL = 5.0


def fill(client: Any, records: int) -> None:
    from django_ledger import State

    ledger = _ledger(client, "bench")
    for start in range(0, records, 128):
        batch = range(start, min(records, start + 128))
        ledger.admit_many([(f"done-{i:07d}", "") for i in batch])
        claims = ledger.claim_many("earlier", len(batch))
        ledger.settle_many([(claim, State.COMPLETED) for claim in claims])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1000, help="ended records in the queue")
    parser.add_argument("--seconds", type=float, default=20.0, help="the idle window counted")
    parser.add_argument("--warmup", type=float, default=600.0, help="most to wait for the pass")
    args = parser.parse_args(argv)
    server = RedisServer()
    server.start()
    worker: subprocess.Popen[bytes] | None = None
    try:
        client = server.client()
        fill(client, args.records)
        client.config_resetstat()
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "ledger_worker", "bench"],
            cwd=ROOT,
            env=_django_env(server.url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        began = time.monotonic()
        scans, still_since = -1, time.monotonic()
        while time.monotonic() - began < args.warmup:
            now_scans = _calls(client)["cmdstat_hscan"]
            if now_scans != scans:
                scans, still_since = now_scans, time.monotonic()
            elif scans > 0 and time.monotonic() - still_since > 2 * INTERVAL:
                break
            time.sleep(0.5)
        waited = time.monotonic() - began
        client.config_resetstat()
        time.sleep(args.seconds)
        counted = {name.removeprefix("cmdstat_"): n for name, n in _calls(client).items()}
        counted.pop("info", None)  # this script's own reads
        counted.pop("config|resetstat", None)
        total = sum(counted.values())
        top = ", ".join(
            f"{name} {n}" for name, n in sorted(counted.items(), key=lambda item: -item[1])[:8]
        )
        print(
            f"{args.records} ended records; first pass over after {waited:.0f} s "
            f"({scans} HSCAN); then {args.seconds:.0f} s idle: {total} commands "
            f"({total / args.seconds:.1f} a second; block time-out 1 s): {top}"
        )
        client.close()
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(30)
        server.stop()
        server.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
