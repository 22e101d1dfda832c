"""Conservation through real ``ledger_worker`` processes, long run by hand.

The short run is ``tests/worker/test_worker_conservation.py``; both use
``tests/support/harness/worker_experiment.py``. From the repository root:

    python -m benchmarks.worker_conservation --identities 50000 --duration 180

It starts its own redis-server (AOF, ``appendfsync always``) on a free port, 2
producers and 3 ``manage.py ledger_worker conserve`` processes (``tests.support.bench_settings``),
SIGKILLs and SIGTERMs workers (restarting them), SIGKILLs Redis and restarts it from its
AOF, and flushes the ledger's functions, at random moments over ``--duration`` seconds; waits
for the queue to drain; checks every identity; prints one table. The exit status is 0
for PASS and 1 for FAIL (anything lost, ended twice, run again unexplained, or wrong).
Logs stay in ``--workdir`` (a temporary directory by default, printed first).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.harness.worker_experiment import WORKER_FAULTS, WorkerRun, run_workers


def parse(argv: list[str]) -> WorkerRun:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--identities", type=int, default=50_000, help="default 50,000")
    parser.add_argument("--workers", type=int, default=3, help="ledger_worker processes (3)")
    parser.add_argument("--concurrency", type=int, default=8, help="each worker's (8)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (2)")
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of faults (180)")
    parser.add_argument(
        "--admit-seconds", type=float, default=None, help="default: 75%% of --duration"
    )
    parser.add_argument(
        "--work-seconds", type=float, default=0.04, help="each run sleeps up to this (0.04)"
    )
    parser.add_argument(
        "--fault-interval", type=float, default=4.0, help="mean seconds between faults (4)"
    )
    parser.add_argument("--min-faults", type=int, default=3, help="of each kind (3)")
    parser.add_argument("--seed", type=int, default=20_240_601)
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--workdir", default="", help="where the logs go (default: a new one)")
    options = parser.parse_args(argv)
    return WorkerRun(
        identities=options.identities,
        workers=options.workers,
        concurrency=options.concurrency,
        producers=options.producers,
        duration=options.duration,
        admit_seconds=options.admit_seconds,
        work_seconds=options.work_seconds,
        min_faults=dict.fromkeys(WORKER_FAULTS, options.min_faults),
        fault_interval=options.fault_interval,
        seed=options.seed,
        drain_timeout=options.drain_timeout,
        workdir=options.workdir,
    )


def main(argv: list[str]) -> int:
    run = parse(argv)
    started = time.monotonic()
    outcome = run_workers(run, echo=lambda line: print(line, flush=True))
    print(outcome.table)
    print(f"wall time {time.monotonic() - started:.0f} s; logs in {run.workdir}")
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
