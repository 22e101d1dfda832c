"""Requests per second through the REST API under gunicorn, beside the Python API.

Run from the repository root (the figures and the command are in docs/api.md):

    python -m benchmarks.api_bench                  # 2 client processes, 2000 calls each
    python -m benchmarks.api_bench --calls 500 --batches 10

It starts its own redis-server and a gunicorn serving ``testproject`` (SQLite in a
temporary folder, token authentication as a superuser), each on a free port of
127.0.0.1, and stops both at the end. Each phase runs 2 client processes (HTTP/1.1
keep-alive connections, stdlib ``http.client``) at once; the same operations are then
timed through the Python API (``Ledger`` on a redis-py client) with 2 processes too.
A phase's rate is its total work over the wall time from a shared start to the last
process done. Every loop is bounded by a count and by ``--max-seconds``. Each client
first makes 200 untimed calls, so that gunicorn's workers have imported and connected.
``DJANGO_SETTINGS_MODULE`` (default ``testproject.settings``) picks the server's settings.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from django_ledger import MAX_BATCH, Ledger, State  # noqa: E402
from tests.support.redis_server import RedisServer, free_port  # noqa: E402

PAYLOAD = "x" * 200
NAMESPACE = "bench"
QUEUE = "default"
CLIENTS = 2


# -- the server under test ------------------------------------------------------------


def environment(redis_url: str, folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "testproject.settings"),
        REDIS_URL=redis_url,
        DATABASE_PATH=str(folder / "bench.sqlite3"),
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    env.pop("DJANGO_DEBUG", None)
    return env


def prepare_database(env: dict[str, str]) -> str:
    """Migrate the benchmark database and return a superuser's API token."""
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True
    )
    script = (
        "from django.contrib.auth.models import User\n"
        "from rest_framework.authtoken.models import Token\n"
        "user = User.objects.create_superuser('bench', 'bench@example.com', None)\n"
        "print(Token.objects.create(user=user).key)\n"
    )
    done = subprocess.run(
        [python, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip().splitlines()[-1]


def start_gunicorn(env: dict[str, str], port: int, workers: int, threads: int) -> Any:
    gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent)) or "gunicorn"
    command = [
        gunicorn,
        "testproject.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        "gthread",
        "--threads",
        str(threads),
        "--keep-alive",
        "30",
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            if process.poll() is not None:
                raise SystemExit("gunicorn exited at start") from None
            time.sleep(0.1)
    process.terminate()
    raise SystemExit("gunicorn did not start listening within 30 s")


# -- HTTP clients ----------------------------------------------------------------------


class Api:
    """One keep-alive connection to the API, as one client process holds it."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        self.connection.request(
            "POST", f"/api/queues/{QUEUE}/{path}", json.dumps(body), self.headers
        )
        response = self.connection.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else None


def warm_up(client: int, port: int, token: str, count: int) -> tuple[int, None]:
    """Make gunicorn's workers import, connect and fill their caches before timing."""
    api = Api(port, token)
    for i in range(count):
        api.post("admit/", {"request_id": f"warm-{client}-{i}", "payload": PAYLOAD})
    return count, None


def http_phase(
    kind: str, client: int, port: int, token: str, count: int, limit: float
) -> tuple[int, list[str]]:
    """Run ``count`` calls of ``kind``; return the items done (and claim tokens)."""
    api = Api(port, token)
    deadline = time.monotonic() + limit
    done = 0
    tokens: list[str] = []
    for i in range(count):
        if time.monotonic() > deadline:
            break
        if kind == "admit":
            status, _ = api.post("admit/", {"request_id": f"c{client}-{i}", "payload": PAYLOAD})
            done += status == 201
        elif kind == "admit_batch":
            items = [
                {"request_id": f"c{client}-{i}-{j}", "payload": PAYLOAD} for j in range(MAX_BATCH)
            ]
            status, body = api.post("admit/batch/", {"items": items})
            done += sum(r["status"] == "ADMITTED" for r in body["results"])
        elif kind in ("claim", "claim_batch"):
            limit_n = 1 if kind == "claim" else MAX_BATCH
            status, body = api.post("claims/", {"owner": f"w{client}", "limit": limit_n})
            if status == 204:
                break
            tokens += [c["token"] for c in body["claims"]]
            done += len(body["claims"])
    return done, tokens


def http_settle(
    client: int, port: int, token: str, tokens: list[str], batch: int, limit: float
) -> tuple[int, None]:
    api = Api(port, token)
    deadline = time.monotonic() + limit
    done = 0
    for start in range(0, len(tokens), batch):
        if time.monotonic() > deadline:
            break
        chunk = tokens[start : start + batch]
        if batch == 1:
            status, _ = api.post("claims/settle/", {"token": chunk[0]})
            done += status == 200
        else:
            status, body = api.post(
                "claims/settle/batch/", {"items": [{"token": t} for t in chunk]}
            )
            done += sum(r["status"] == "SETTLED" for r in body["results"])
    return done, None


# -- Python API clients ------------------------------------------------------------------


def python_phase(
    kind: str, client: int, redis_url: str, count: int, limit: float
) -> tuple[int, list[Any]]:
    import redis

    ledger = Ledger(redis.Redis.from_url(redis_url), NAMESPACE, QUEUE, max_records=10_000_000)
    deadline = time.monotonic() + limit
    done = 0
    claims = []
    for i in range(count):
        if time.monotonic() > deadline:
            break
        if kind == "admit":
            done += ledger.admit(f"c{client}-{i}", PAYLOAD).accepted
        elif kind == "admit_batch":
            pairs = [(f"c{client}-{i}-{j}", PAYLOAD) for j in range(MAX_BATCH)]
            done += sum(a.accepted for a in ledger.admit_many(pairs))
        elif kind == "claim":
            claim = ledger.claim(f"w{client}")
            if claim is None:
                break
            claims.append(claim)
            done += 1
        elif kind == "claim_batch":
            got = ledger.claim_many(f"w{client}", MAX_BATCH)
            if not got:
                break
            claims += got
            done += len(got)
    return done, claims


def python_settle(
    client: int, redis_url: str, claims: list[Any], batch: int, limit: float
) -> tuple[int, None]:
    import redis

    ledger = Ledger(redis.Redis.from_url(redis_url), NAMESPACE, QUEUE, max_records=10_000_000)
    deadline = time.monotonic() + limit
    done = 0
    for start in range(0, len(claims), batch):
        if time.monotonic() > deadline:
            break
        chunk = claims[start : start + batch]
        if batch == 1:
            done += ledger.settle(chunk[0]).ok
        else:
            done += sum(s.ok for s in ledger.settle_many([(c, State.COMPLETED) for c in chunk]))
    return done, None


# -- running phases ----------------------------------------------------------------------


def _worker(target: Callable[..., Any], args: tuple[Any, ...], start: Any, out: Any) -> None:
    start.wait()
    began = time.perf_counter()
    items, extra = target(*args)
    out.put((args[1], items, began, time.perf_counter(), extra))


def run_parallel(
    target: Callable[..., Any], args_per_client: list[tuple[Any, ...]]
) -> tuple[tuple[int, float], dict[int, Any]]:
    """Run ``target`` in one process per argument tuple from a shared start.

    Return (items done, wall seconds) and what each client handed back, by client.
    """
    context = mp.get_context("fork")
    start = context.Barrier(len(args_per_client) + 1)
    out = context.Queue()
    processes = [
        context.Process(target=_worker, args=(target, args, start, out)) for args in args_per_client
    ]
    for process in processes:
        process.start()
    start.wait()
    # Read every result before joining: a child cannot exit while its queue is full.
    results = [out.get(timeout=900) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    items = sum(r[1] for r in results)
    seconds = max(r[3] for r in results) - min(r[2] for r in results)
    return (items, seconds), {r[0]: r[4] for r in results}


def seed(client: Any, namespace: str, count: int) -> None:
    ledger = Ledger(client, namespace, QUEUE, max_records=10_000_000)
    for start in range(0, count, MAX_BATCH):
        ledger.admit_many([(f"s{i}", PAYLOAD) for i in range(start, min(count, start + MAX_BATCH))])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="single-item calls per client")
    parser.add_argument("--batches", type=int, default=20, help="batch calls per client")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=2, help="threads per gunicorn worker")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="cap of each phase")
    options = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="ledger-api-bench-"))
    server = RedisServer()
    server.start()
    gunicorn = None
    try:
        env = environment(server.url, folder)
        token = prepare_database(env)
        port = free_port()
        gunicorn = start_gunicorn(env, port, options.workers, options.threads)
        run_parallel(warm_up, [(c, port, token, 200) for c in range(CLIENTS)])
        # The API writes in the testproject's namespace ("ledger"); the Python API in
        # its own; Redis is emptied between phases.
        redis = server.client(decode_responses=False)
        cap = options.max_seconds
        clients = range(CLIENTS)
        rows = []
        for kind, calls, batch in (
            ("admit", options.calls, 1),
            ("admit_batch", options.batches, MAX_BATCH),
        ):
            redis.flushall()
            http, _ = run_parallel(
                http_phase, [(kind, c, port, token, calls, cap) for c in clients]
            )
            redis.flushall()
            py, _ = run_parallel(python_phase, [(kind, c, server.url, calls, cap) for c in clients])
            rows.append((kind, batch, http, py))
        for claim_kind, settle_kind, calls, batch in (
            ("claim", "settle", options.calls, 1),
            ("claim_batch", "settle_batch", options.batches, MAX_BATCH),
        ):
            redis.flushall()
            seed(redis, "ledger", calls * batch * CLIENTS)
            seed(redis, NAMESPACE, calls * batch * CLIENTS)
            http, tokens = run_parallel(
                http_phase, [(claim_kind, c, port, token, calls, cap) for c in clients]
            )
            http_settled, _ = run_parallel(
                http_settle, [(c, port, token, tokens[c], batch, cap) for c in clients]
            )
            py, claims = run_parallel(
                python_phase, [(claim_kind, c, server.url, calls, cap) for c in clients]
            )
            py_settled, _ = run_parallel(
                python_settle, [(c, server.url, claims[c], batch, cap) for c in clients]
            )
            rows.append((claim_kind, batch, http, py))
            rows.append((settle_kind, batch, http_settled, py_settled))
        report(rows, options)
    finally:
        if gunicorn is not None:
            gunicorn.terminate()
            gunicorn.wait(timeout=30)
        server.stop()
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def report(rows: list[tuple[str, int, tuple[int, float], tuple[int, float]]], options: Any) -> None:
    print(
        f"\nREST API under gunicorn ({options.workers} workers x {options.threads} threads, gthread) "
        f"vs Python API; {CLIENTS} client processes each; 127.0.0.1; {os.cpu_count()} CPUs"
    )
    header = f"{'operation':<14}{'items/call':>11}{'API calls/s':>13}{'API items/s':>13}{'Python calls/s':>16}{'Python items/s':>16}{'API/Python':>12}"
    print(header)
    print("-" * len(header))
    for kind, batch, (http_items, http_s), (py_items, py_s) in rows:
        http_rate = http_items / http_s if http_s else 0.0
        py_rate = py_items / py_s if py_s else 0.0
        print(
            f"{kind:<14}{batch:>11}{http_rate / batch:>13,.0f}{http_rate:>13,.0f}"
            f"{py_rate / batch:>16,.0f}{py_rate:>16,.0f}{(http_rate / py_rate if py_rate else 0):>12.2f}"
        )


if __name__ == "__main__":
    main()
