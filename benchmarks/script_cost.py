"""What one script call costs inside Redis: the time a task's claim and settlement spend there.

Run from the repository root (docs/performance.md, "Where a task's round trip goes"):

    python3 -m benchmarks.script_cost            # Redis on CPU 0, this client on CPU 1
    python3 -m benchmarks.script_cost --no-pin

It starts its own redis-server on a free port, loads every ledger script (as a worker's
client does), and for each step below makes ``--calls`` calls one after another, then
reads Redis's own time per call from ``INFO commandstats`` (``usec_per_call`` of
``EVALSHA``, or ``FCALL``: the commands a script runs are inside it). The client's own
time and the round trip are not in these figures; ``PING`` gives the round trip beside
them, timed by the client.

* ``admit``: ``Ledger.admit`` of a new id (the script a ``task.enqueue()`` runs);
* ``claim one`` and ``claim, nothing due``: ``Ledger.claim`` with one PENDING record
  due, and on an empty queue;
* ``settle one``: ``Ledger.settle`` of one claim as COMPLETED with a 20-byte result;
* ``settle_and_claim one for one``: what a worker at ``--concurrency 1 --prefetch 0``
  sends per task (one settlement, one claim, in one call);
* ``empty script``: ``return 1``, Redis's own cost of any script call;
* ``settle_and_claim's prelude``: the Lua that script carries before its body
  (``core/scripts.py``), then ``return 1``: what building its functions costs each call;
* ``that prelude as a function library``: the same Lua loaded once with ``FUNCTION
  LOAD`` (Redis 7's functions, whose definitions run at load time), then ``FCALL`` of a
  function that returns 1. Not what the ledger does: a measure of what it would save.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.redis_server import RedisServer

PAYLOAD = '{"args": [1, 2], "kwargs": {}, "backend": "default"}'


def server_time(client: Any, command: str, calls: int, call: Callable[[int], object]) -> float:
    """Make ``calls`` calls (after 100 not counted); Redis's microseconds per ``command``."""
    for number in range(100):
        call(-1 - number)
    client.config_resetstat()
    for number in range(calls):
        call(number)
    return float(client.info("commandstats")[f"cmdstat_{command}"]["usec_per_call"])


def steps(client: Any, calls: int) -> list[tuple[str, float]]:
    from django_ledger import Ledger, State
    from django_ledger.core.scripts import SCRIPT_NAMES, key_line, prelude, source

    for name in SCRIPT_NAMES:
        client.script_load(source(name))
    rows: list[tuple[str, float]] = []

    def ledger(queue: str) -> Any:
        return Ledger(client, "cost", queue, max_records=10_000_000)

    admits = ledger("admit")
    rows.append(
        ("admit", server_time(client, "evalsha", calls, lambda i: admits.admit(f"a{i}", PAYLOAD)))
    )
    claims = ledger("claim")
    claims.admit_many([(f"c{i}", PAYLOAD) for i in range(-100, calls)])
    held: list[Any] = []
    rows.append(
        (
            "claim one",
            server_time(client, "evalsha", calls, lambda i: held.append(claims.claim("w"))),
        )
    )
    rows.append(
        (
            "settle one",
            server_time(
                client,
                "evalsha",
                calls,
                lambda i: claims.settle(held.pop(), State.COMPLETED, result="r" * 20),
            ),
        )
    )
    fused = ledger("fused")
    fused.admit_many([(f"f{i}", PAYLOAD) for i in range(-101, calls)])
    hand = [fused.claim("w")]

    def settle_and_claim(_: int) -> None:
        _, got = fused.settle_and_claim([(hand[0], State.COMPLETED, 0, "r" * 20)], "w", 1)
        hand[0] = got[0]

    rows.append(
        ("settle_and_claim one for one", server_time(client, "evalsha", calls, settle_and_claim))
    )
    empty = ledger("empty")
    rows.append(
        ("claim, nothing due", server_time(client, "evalsha", calls, lambda i: empty.claim("w")))
    )
    bare = client.script_load("return 1")
    rows.append(
        ("empty script", server_time(client, "evalsha", calls, lambda i: client.evalsha(bare, 0)))
    )
    folder = resources.files("django_ledger.core") / "lua"
    parts = [(folder / part).read_text(encoding="utf-8") for part in prelude("settle_claim")]
    lua = "\n".join([key_line("settle_claim"), *parts])
    carried = client.script_load(lua + "\nreturn 1")
    rows.append(
        (
            "settle_and_claim's prelude",
            server_time(client, "evalsha", calls, lambda i: client.evalsha(carried, 0)),
        )
    )
    # KEYS and ARGV are the prelude's globals in a script; in a library they would be
    # upvalues set by each function (and K, built from KEYS at load here, rebuilt by
    # each call: one table of fifteen keys). This one sets them and returns.
    library = (
        "#!lua name=cost_probe\nlocal KEYS, ARGV = {}, {}\n"
        + lua
        + "\nredis.register_function('cost_probe', function(keys, args)"
        + " KEYS, ARGV = keys, args return 1 end)\n"
    )
    client.function_load(library, replace=True)
    rows.append(
        (
            "that prelude as a function library",
            server_time(client, "fcall", calls, lambda i: client.fcall("cost_probe", 0)),
        )
    )
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per step")
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    args = parser.parse_args(argv)
    server = RedisServer()
    server.start()
    try:
        if args.pin:
            assert server.pid is not None
            os.sched_setaffinity(server.pid, {0})
            os.sched_setaffinity(0, {1})
        client = server.client()
        version = client.info("server")["redis_version"]
        print(f"redis-server {version}, {args.calls} calls per step, pinned={args.pin}")
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
