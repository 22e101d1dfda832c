"""A chord of 10,000 no-op steps: the ledger's workflows beside Celery's chord on Redis.

Run from the repository root in the benchmark's scratch virtualenv (celery is not a
dependency of the project; the venv needs celery[redis] and the project's own
dependencies, the project itself from ``PYTHONPATH``):

    PYTHONPATH=. /work/venv-bench/bin/python -m benchmarks.workflow_bench
    PYTHONPATH=. /work/venv-bench/bin/python -m benchmarks.workflow_bench --steps 2000 --rounds 3

It starts its own redis-server on a free port (never 6379), pins it to CPU 0 and itself
to CPU 1 (``sched_setaffinity``, what ``taskset`` does; the worker processes it starts
inherit CPU 1), and runs rounds. A round runs every system once, in an order that turns
by one each round; for each: ``FLUSHALL``, start one worker process and wait until it
has run one warm-up task, ``CONFIG RESETSTAT``, then the timed part: build and enqueue
the chord (a group of ``--steps`` no-op steps, each returning its index, and a callback
that gets the list of their results and returns how many there were and whether they
came in order), then wait for the callback's result and read it back. The clock runs
from the first signature built to the result in hand. Systems (``--only`` picks some):

* ``celery``: ``chord(step.s(i) ...)(collect.s())`` on Celery with a Redis broker and a
  Redis result backend (both the bench's server), Celery's defaults otherwise (the
  Redis backend's native chord counter: no ``chord_unlock`` polling), one worker
  ``celery worker --pool threads --concurrency 8`` (8: the ledger worker's default),
  plain Celery (no ``DJANGO_SETTINGS_MODULE``, so its Django fix-up is off: the faster
  way); the result read by ``AsyncResult.get()`` (Celery's pub/sub wait);
* ``ledger``: the same chord through ``django_ledger.tasks.workflows``
  (``chord([sig(step, i) ...], sig(collect)).enqueue()``, the Django task framework on
  the ledger, ``tests.support.workflow_bench_settings``), one ``manage.py ledger_worker
  wfbench`` with its defaults (concurrency 8, prefetch 8); the bench waits on the count
  of completed records (one ``ZCARD`` every 2 ms, taken out of the command figures),
  then reads the callback's result through its task (``collect.get_result(id)``);
* ``ledger-plain``: the same number of independent no-op Django tasks, admitted with
  ``enqueue_many`` and drained by the same worker: what the steps cost without a
  workflow, for the per-step command counts below.

Figures per run: seconds from enqueue to result, steps per second, and the Redis
commands per step from ``INFO commandstats`` over the timed window (enqueue, drain and
read; commands that scripts run included; ``scripts/step``: ``FCALL`` + ``EVALSHA`` + ``EVAL``).
After the rounds, one more untimed run per system (``--count-steps``, 2,000 by default)
under ``MONITOR``: the chord is enqueued first, with no worker running; then the worker
starts and drains it while the bench polls with a command of its own; the commands the
worker sent (not those its scripts ran, not the bench's) are counted per step. A child's
release costs no extra round trip when the ledger's chord steps cost the worker as many
requests each as ``ledger-plain``'s independent tasks.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from benchmarks.workflow_systems import (
    CLASSES,
    POLL,
    SCRIPT_COMMANDS,
    SYSTEMS,
    Ledger,
    System,
    command_calls,
    stop_worker,
)

# -- runs ---------------------------------------------------------------------------------


@dataclass
class Run:
    system: str
    steps: int
    seconds: float = float("nan")
    commands: float = float("nan")
    scripts: float = float("nan")
    ok: bool = False
    detail: str = ""
    by_command: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.steps / self.seconds if self.ok else float("nan")


def run_once(system: System, steps: int) -> Run:
    """FLUSHALL, start the worker, warm it, then time one chord."""
    client = system.client
    client.flushall()
    process = system.start()
    result = Run(system.name, steps)
    try:
        system.warm()
        client.config_resetstat()
        outcome = system.timed(steps)
        calls = command_calls(client)
    except Exception as exc:
        result.detail = f"{type(exc).__name__}: {str(exc)[-500:]}"
        return result
    finally:
        stop_worker(process)
    calls["cmdstat_info"] -= 1
    if outcome.poll_command:
        calls[outcome.poll_command] -= outcome.polls
    calls = +calls
    result.seconds, result.ok, result.detail = outcome.seconds, outcome.ok, outcome.detail
    result.by_command = calls
    result.commands = sum(calls.values()) / steps
    result.scripts = sum(calls[name] for name in SCRIPT_COMMANDS) / steps
    return result


def count_once(system: System, steps: int) -> tuple[Counter[str], float, bool]:
    """Enqueue with no worker, then drain under MONITOR: the worker's requests per step."""
    from benchmarks.worker_bench import Monitor

    client = system.client
    client.flushall()
    done = system.enqueue(steps)
    port = int(client.connection_pool.connection_kwargs["port"])
    watcher = Monitor(port, {client.client_info()["addr"]})
    process = system.start()
    finished = False
    began = time.perf_counter()
    try:
        deadline = began + max(300.0, steps / 5)
        while time.perf_counter() < deadline and process.poll() is None:
            if done():
                finished = True
                break
            time.sleep(POLL)
        seconds = time.perf_counter() - began
    finally:
        stop_worker(process)
        sent = watcher.stop()
    return Counter({k: v / steps for k, v in sent.items()}), seconds, finished


def bench(args: argparse.Namespace) -> int:
    from tests.support.redis_server import RedisServer

    chosen = [name for name in SYSTEMS if name in args.only.split(",")] if args.only else SYSTEMS
    server: RedisServer = RedisServer()
    server.start()
    if args.pin:
        assert server.pid is not None
        os.sched_setaffinity(server.pid, {0})
        os.sched_setaffinity(0, {1})
    logs = Path(args.logs or f"/tmp/workflow-bench-{os.getpid()}")
    logs.mkdir(parents=True, exist_ok=True)
    try:
        client = server.client()
        info = client.info("server")
        print(
            f"redis-server {info['redis_version']} on port {server.port}, steps={args.steps}, "
            f"rounds={args.rounds}, pinned={args.pin} (Redis CPU 0, bench and workers CPU 1), "
            f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f} at start, "
            f"logs in {logs}"
        )
        table: dict[str, System] = {}
        for name in chosen:
            try:
                table[name] = CLASSES[name](server.url, client, logs)
            except Exception as exc:
                print(f"skipping {name}: {type(exc).__name__}: {str(exc)[-300:]}")
        chosen = [name for name in chosen if name in table]
        for name in chosen:
            print(f"  {name:<13} {table[name].how}")
        runs: dict[str, list[Run]] = {name: [] for name in chosen}
        for round_number in range(args.rounds):
            turn = round_number % len(chosen)
            for name in chosen[turn:] + chosen[:turn]:
                result = run_once(table[name], args.steps)
                runs[name].append(result)
                state = "ok" if result.ok else f"FAILED {result.detail}"
                print(
                    f"round {round_number + 1} {name:<13} {result.seconds:7.2f} s  "
                    f"{result.rate:>8,.0f} steps/s  {result.commands:6.2f} cmds/step  "
                    f"{result.scripts:5.2f} scripts/step  {state}",
                    flush=True,
                )
        sent: dict[str, Counter[str]] = {}
        if args.count:
            for name in chosen:
                variants = [("", [])]
                if isinstance(table[name], Ledger):
                    variants.append((" c1", ["--concurrency", "1", "--prefetch", "0"]))
                for suffix, options in variants:
                    system = table[name]
                    if isinstance(system, Ledger):
                        system.options = options
                    counts, seconds, finished = count_once(system, args.count_steps)
                    if isinstance(system, Ledger):
                        system.options = []
                    if not finished:
                        print(f"count run {name}{suffix}: NOT finished after {seconds:.0f} s")
                        continue
                    sent[name + suffix] = counts
        report(runs, sent, args.count_steps)
        client.close()
    finally:
        server.stop()
        server.cleanup()
    return 0 if all(r.ok for results in runs.values() for r in results) else 1


def report(runs: dict[str, list[Run]], sent: dict[str, Counter[str]], count_steps: int) -> None:
    def ratio(name: str, peer: str) -> str:
        if name not in runs or peer not in runs:
            return "-"
        pairs = [
            b.seconds / a.seconds
            for a, b in zip(runs[name], runs[peer], strict=True)
            if a.ok and b.ok
        ]
        return f"{median(pairs):.2f}x" if pairs else "-"

    print(
        f"\n{'system':<14}{'steps':>7}{'seconds':>9}{'steps/s':>9}{'vs celery':>11}"
        f"{'cmds/step':>11}{'scripts/step':>14}{'sent/step':>11}  worker's most sent per step"
    )
    for name, results in runs.items():
        done = [r for r in results if r.ok]
        if not done:
            print(f"{name:<14} never finished: {results[0].detail if results else ''}")
            continue
        counts = sent.get(name, Counter())
        top = ", ".join(f"{k} {v:.2f}" for k, v in counts.most_common(4))
        print(
            f"{name:<14}{done[0].steps:>7,}{median(r.seconds for r in done):>9.2f}"
            f"{median(r.rate for r in done):>9,.0f}{ratio(name, 'celery'):>11}"
            f"{median(r.commands for r in done):>11.2f}{median(r.scripts for r in done):>14.2f}"
            f"{sum(counts.values()) if counts else float('nan'):>11.2f}  {top}"
        )
    print(
        "\nseconds: from building the first signature to the callback's result read back "
        "(ledger-plain: to the last task seen done), median of the rounds; vs celery: "
        "median of the per-round ratios celery seconds / this row's seconds; cmds/step: INFO "
        "commandstats over the timed window / steps (commands scripts ran included, the "
        "bench's own waiting polls taken out); scripts/step: FCALL + EVALSHA + EVAL; sent/step: "
        f"requests the worker sent per step (MONITOR, one more untimed run of {count_steps:,} "
        "steps enqueued before the worker started; its start-up included)."
    )
    for name in ("ledger", "ledger-plain"):
        mine = [r.seconds for r in runs.get(name, []) if r.ok]
        theirs = [r.seconds for r in runs.get("celery", []) if r.ok]
        if mine and theirs:
            print(
                f"{name} against celery, the least favourable pairing (celery's fastest run "
                f"{min(theirs):.2f} s over {name}'s slowest {max(mine):.2f} s): "
                f"{min(theirs) / max(mine):.2f}x"
            )
    for suffix, how in (("", "defaults"), (" c1", "--concurrency 1 --prefetch 0")):
        chord_run, plain_run = sent.get("ledger" + suffix), sent.get("ledger-plain" + suffix)
        if chord_run is None or plain_run is None:
            continue
        chord_sent, plain_sent = sum(chord_run.values()), sum(plain_run.values())
        chord_scripts = sum(chord_run[name[len("cmdstat_") :]] for name in SCRIPT_COMMANDS)
        plain_scripts = sum(plain_run[name[len("cmdstat_") :]] for name in SCRIPT_COMMANDS)
        print(
            f"release of a child ({how}): the worker sent {chord_sent:.3f} requests "
            f"({chord_scripts:.3f} scripts) per chord step, {plain_sent:.3f} "
            f"({plain_scripts:.3f}) per independent task: {chord_sent - plain_sent:+.3f} "
            f"per step (the callback is one step more: {1 / count_steps:+.4f} per step)"
        )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=10_000, help="chord steps (10,000)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians)")
    parser.add_argument("--only", default="", help="comma-separated systems: " + ",".join(SYSTEMS))
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin CPUs")
    parser.add_argument("--no-count", dest="count", action="store_false", help="no MONITOR run")
    parser.add_argument("--count-steps", type=int, default=2_000, help="steps of the MONITOR run")
    parser.add_argument("--logs", default="", help="where the workers' output goes")
    args = parser.parse_args(argv)
    return bench(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
