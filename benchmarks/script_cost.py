"""What one script call costs inside Redis: the time a task's claim and settlement spend there.

Run from the repository root (docs/performance.md, "The ledger's Lua as a function library"):

    python3 -m benchmarks.script_cost            # Redis on CPU 0, this client on CPU 1
    python3 -m benchmarks.script_cost --no-pin
    python3 -m benchmarks.script_cost --code /path/to/other/checkout   # another version

It starts its own redis-server on a free port, loads the ledger's Lua (the function
library; with ``--code`` of a version before it, every script with ``SCRIPT LOAD``), and
for each step below makes ``--calls`` calls one after another, then reads Redis's own
time per call from ``INFO commandstats`` (``usec_per_call`` of ``FCALL``, or of
``EVALSHA`` for a version that ran scripts: the commands a call runs are inside it).
The client's own time and the round trip are not in these figures; ``PING`` gives the
round trip beside them, timed by the client.

* ``admit``: ``Ledger.admit`` of a new id (the call a ``task.enqueue()`` makes);
* ``claim one`` and ``claim, nothing due``: ``Ledger.claim`` with one PENDING record
  due, and on an empty queue;
* ``settle one``: ``Ledger.settle`` of one claim as COMPLETED with a 20-byte result;
* ``settle_and_claim one for one``: what a worker at ``--concurrency 1 --prefetch 0``
  sends per task (one settlement, one claim, in one call);
* ``empty script``: ``EVALSHA`` of ``return 1``, Redis's own cost of any script call;
* ``empty function``: ``FCALL`` of a function that returns 1, the same for a function.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PAYLOAD = '{"args": [1, 2], "kwargs": {}, "backend": "default"}'


def server_time(client: Any, command: str, calls: int, call: Callable[[int], object]) -> float:
    """Make ``calls`` calls (after 100 not counted); Redis's microseconds per ``command``."""
    for number in range(100):
        call(-1 - number)
    client.config_resetstat()
    for number in range(calls):
        call(number)
    return float(client.info("commandstats")[f"cmdstat_{command}"]["usec_per_call"])


def load(client: Any) -> str:
    """Load the ledger's Lua as the code under test runs it; the command its calls are."""
    try:
        from django_ledger.core.library import library
    except ImportError:  # a version that ran scripts (EVALSHA)
        from django_ledger.core import scripts

        for name in scripts.SCRIPT_NAMES:
            client.script_load(scripts.source(name))  # type: ignore[attr-defined]
        return "evalsha"
    client.function_load(library().source, replace=True)
    return "fcall"


def steps(client: Any, calls: int) -> list[tuple[str, float]]:
    from django_ledger import Ledger, State

    command = load(client)
    rows: list[tuple[str, float]] = []

    def ledger(queue: str) -> Any:
        return Ledger(client, "cost", queue, max_records=10_000_000)

    def measure(label: str, call: Callable[[int], object], name: str = command) -> None:
        rows.append((label, server_time(client, name, calls, call)))

    admits = ledger("admit")
    measure("admit", lambda i: admits.admit(f"a{i}", PAYLOAD))
    claims = ledger("claim")
    claims.admit_many([(f"c{i}", PAYLOAD) for i in range(-100, calls)])
    held: list[Any] = []
    measure("claim one", lambda i: held.append(claims.claim("w")))
    measure("settle one", lambda i: claims.settle(held.pop(), State.COMPLETED, result="r" * 20))
    fused = ledger("fused")
    fused.admit_many([(f"f{i}", PAYLOAD) for i in range(-101, calls)])
    hand = [fused.claim("w")]

    def settle_and_claim(_: int) -> None:
        _, got = fused.settle_and_claim([(hand[0], State.COMPLETED, 0, "r" * 20)], "w", 1)
        hand[0] = got[0]

    measure("settle_and_claim one for one", settle_and_claim)
    empty = ledger("empty")
    measure("claim, nothing due", lambda i: empty.claim("w"))
    bare = client.script_load("return 1")
    measure("empty script", lambda i: client.evalsha(bare, 0), "evalsha")
    client.function_load(
        "#!lua name=cost_probe\nredis.register_function('cost_probe', function() return 1 end)",
        replace=True,
    )
    measure("empty function", lambda i: client.fcall("cost_probe", 0), "fcall")
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per step")
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument("--code", type=Path, help="the checkout whose django_ledger to run")
    args = parser.parse_args(argv)
    if args.code is not None:  # before anything imports django_ledger
        sys.path.insert(0, str(args.code.resolve()))
    from tests.support.redis_server import RedisServer

    server = RedisServer()
    server.start()
    try:
        if args.pin:
            assert server.pid is not None
            os.sched_setaffinity(server.pid, {0})
            os.sched_setaffinity(0, {1})
        client = server.client()
        version = client.info("server")["redis_version"]
        import django_ledger

        code = Path(django_ledger.__file__).resolve().parent.parent
        print(f"redis-server {version}, {args.calls} calls per step, pinned={args.pin}, {code}")
        for label, micros in steps(client, args.calls):
            print(f"{label:<36} {micros:8.1f} us in Redis per call")
        began = time.perf_counter()
        for _ in range(args.calls):
            client.ping()
        rtt = (time.perf_counter() - began) / args.calls * 1e6
        print(f"{'PING, back to back (client timed)':<36} {rtt:8.1f} us round trip")
        client.close()
    finally:
        server.stop()
        server.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
