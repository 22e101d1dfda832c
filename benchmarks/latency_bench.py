"""Latency of a Django task: from before ``enqueue()`` until ``get_result()`` reads SUCCESSFUL.

Run from the repository root:

    python -m benchmarks.latency_bench                 # old (the merge-base with main) and new
    python -m benchmarks.latency_bench --old abc123    # old: any commit
    python -m benchmarks.latency_bench --tasks 50      # fewer tasks per mode

It starts its own redis-server on a free port (never 6379), pins it to CPU 0 and itself
(and so the worker processes it starts) to CPU 1 (``sched_setaffinity``). Each variant is
one ``manage.py ledger_worker`` process with its defaults, on ``tests.latency_settings``
(the test project and ``tests.bench_tasks_app``: a no-op task, no signal receivers): new
is this checkout, old a copy of ``--old`` (``git archive``) in a temporary directory, with
this checkout's bench app and settings copied in. The bench process enqueues with this
checkout's code, so both variants measure the same client.

Two modes, ``--tasks`` tasks each (200), old and new in turn: **busy**, tasks 0 to 50 ms
apart (uniform), and **idle**, 1 to 1.5 s apart. Each task: ``perf_counter``, then
``noop.enqueue()``, then ``get_result()`` every 1 ms until SUCCESSFUL. Prints median,
p99 and max per variant and mode.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: What the old checkout needs of this one to run the same worker.
_COPIED = ("tests/bench_tasks_app", "tests/latency_settings.py")


def _old_tree(ref: str, into: Path) -> Path:
    """A copy of commit ``ref`` with the bench app and settings of this checkout."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", ref], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for name in _COPIED:
        source, target = ROOT / name, into / name
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy(source, target)
    return into


def _worker(tree: Path, url: str, namespace: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "REDIS_URL": url,
        "LEDGER_NAMESPACE": namespace,
        "DJANGO_SETTINGS_MODULE": "tests.latency_settings",
        "PYTHONPATH": str(tree),
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "ledger_worker"],
            cwd=tree,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _one(noop: Any, successful: Any) -> float:
    """One task's latency in seconds: enqueue, then read the result every 1 ms."""
    began = time.perf_counter()
    result = noop.enqueue()
    while True:
        if noop.get_result(result.id).status == successful:
            return time.perf_counter() - began
        time.sleep(0.001)


def _measure(noop: Any, successful: Any, tasks: int, gap: tuple[float, float]) -> list[float]:
    times = []
    for _ in range(tasks):
        time.sleep(random.uniform(*gap))
        times.append(_one(noop, successful))
    return times


def _line(name: str, mode: str, times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return (
        f"{name:<4} {mode:<5} n={len(ms):<4} median {statistics.median(ms):7.2f} ms  "
        f"p99 {p99:7.2f} ms  max {ms[-1]:7.2f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="the old commit (default: the merge-base with main)")
    parser.add_argument("--tasks", type=int, default=200, help="tasks per mode and variant")
    parser.add_argument("--only", default="busy,idle", help="modes: busy,idle")
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    args = parser.parse_args(argv)
    old = (
        args.old
        or subprocess.run(
            ["git", "merge-base", "HEAD", "main"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )

    sys.path.insert(0, str(ROOT))
    from tests.redis_server import RedisServer

    server = RedisServer()
    server.start()
    scratch = Path(tempfile.mkdtemp(prefix="latency-bench-"))
    workers: list[subprocess.Popen[bytes]] = []
    try:
        if args.pin:
            assert server.pid is not None
            os.sched_setaffinity(server.pid, {0})
            os.sched_setaffinity(0, {1})
        namespace = f"lat{uuid.uuid4().hex[:8]}"
        os.environ.update(
            REDIS_URL=server.url,
            LEDGER_NAMESPACE=namespace,
            DJANGO_SETTINGS_MODULE="tests.latency_settings",
        )
        import django

        django.setup()
        from django_ledger.tasks.compat import TaskResultStatus
        from tests.bench_tasks_app.tasks import noop

        trees = {"old": _old_tree(old, scratch / "old"), "new": ROOT}
        print(
            f"redis-server on port {server.port}, pinned={args.pin} (Redis CPU 0, the rest "
            f"CPU 1), old={old[:10]}, {args.tasks} tasks per mode, python "
            f"{sys.version.split()[0]}, logs in {scratch}",
            flush=True,
        )
        gaps = {"busy": (0.0, 0.05), "idle": (1.0, 1.5)}
        modes = [mode for mode in gaps if mode in args.only.split(",")]
        lines = []
        for mode in modes:
            for name, tree in trees.items():
                server.client().flushall()
                worker = _worker(tree, server.url, namespace, scratch / f"{name}-{mode}.log")
                workers.append(worker)
                _one(noop, TaskResultStatus.SUCCESSFUL)  # up, imports warm
                line = _line(
                    name, mode, _measure(noop, TaskResultStatus.SUCCESSFUL, args.tasks, gaps[mode])
                )
                print(line, flush=True)
                lines.append(line)
                worker.terminate()
                worker.wait(60)
        print("\n".join(["", *lines]))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
        server.stop()
        server.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
