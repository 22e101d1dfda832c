"""The proof of conservation, long run by hand (the short run is tests/core/test_conservation.py).

Run from the repository root (docs/reliability.md explains the experiment and the figures):

    python -m benchmarks.conservation --identities 1000000 --workers 4 --duration 1200

It starts its own redis-server (AOF, ``appendfsync always``) on a free port behind a
fault proxy, runs producers, workers and a repair loop as processes, injects faults for
``--duration`` seconds, waits for the queue to drain, checks every identity and prints
one table. The exit status is 0 for PASS and 1 for FAIL (anything lost, duplicated or
wrong). Logs stay in ``--workdir`` (a temporary directory by default, printed first).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.harness import FAULT_KINDS, Config, run


def parse(argv: list[str]) -> Config:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--identities", type=int, default=1_000_000, help="ids to admit (default 1,000,000)"
    )
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    parser.add_argument(
        "--duration", type=float, default=1200.0, help="seconds of fault injection (default 1200)"
    )
    parser.add_argument(
        "--admit-seconds",
        type=float,
        default=None,
        help="spread admissions over this many seconds (default: 70%% of --duration); "
        "producers go no faster, and slower if they must",
    )
    parser.add_argument(
        "--fault-interval", type=float, default=4.0, help="mean seconds between faults"
    )
    parser.add_argument("--seed", type=int, default=20_240_601)
    parser.add_argument("--admit-batch", type=int, default=128)
    parser.add_argument("--claim-batch", type=int, default=64)
    parser.add_argument(
        "--workdir", default="", help="where the logs go (default: a new temporary directory)"
    )
    parser.add_argument("--drain-timeout", type=float, default=600.0)
    options = parser.parse_args(argv)
    return Config(
        identities=options.identities,
        workers=options.workers,
        producers=options.producers,
        duration=options.duration,
        admit_seconds=options.admit_seconds,
        fault_interval=options.fault_interval,
        seed=options.seed,
        admit_batch=options.admit_batch,
        claim_batch=options.claim_batch,
        workdir=options.workdir,
        drain_timeout=options.drain_timeout,
        min_faults={kind: 2 for kind in FAULT_KINDS},
    )


def main(argv: list[str]) -> int:
    config = parse(argv)
    started = time.monotonic()
    outcome = run(config, echo=lambda line: print(line, flush=True))
    print(outcome.table)
    print(f"wall time {time.monotonic() - started:.0f} s; logs in {config.workdir}")
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
