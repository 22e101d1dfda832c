"""How fast the records admin serves pages of a large queue, read straight from Redis.

Run from the repository root (docs/admin.md holds the figures and how they were made):

    python -m benchmarks.admin_bench                      # 1,000,000 records
    python -m benchmarks.admin_bench --records 100000 --runs 9

It starts its own redis-server on a free port and a throwaway SQLite database (for
the admin's user and session), loads the records with ``admit_many`` (a batch of 128
per script call, each batch due one second after the one before), then serves each
page with Django's test client:

* first page: the list as it opens (100 rows, sorted by due time);
* page 5,000: half-way through a million records;
* date range: a due-time range holding about a tenth of the records, page 50 of it;
* search: one exact request id.

For each it prints the median and the slowest time of ``--runs`` requests, the
Redis calls the page made (counted on the admin's client), and the peak Python
memory of one request (tracemalloc, measured in a separate request: tracing slows
everything down).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.redis_server import RedisServer

QUEUE = "bench"
BATCH = 128


def load(ledger: Any, total: int) -> float:
    """Admit ``total`` records, each batch of 128 due a second after the last; return seconds."""
    start = time.perf_counter()
    for first in range(0, total, BATCH):
        batch = [(f"req-{i:08d}", f'{{"n": {i}}}') for i in range(first, min(total, first + BATCH))]
        answers = ledger.admit_many(batch, delay=first // BATCH)
        assert all(answer.accepted for answer in answers)
    return time.perf_counter() - start


def utc_params(lookup: str, low_ms: int, high_ms: int) -> dict[str, str]:
    params = {}
    for suffix, ms in (("gte", low_ms), ("lte", high_ms)):
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
        params[f"{lookup}__range__{suffix}_0"] = moment.strftime("%Y-%m-%d")
        params[f"{lookup}__range__{suffix}_1"] = moment.strftime("%H:%M:%S")
    return params


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--runs", type=int, default=15, help="requests timed per page (median reported)"
    )
    args = parser.parse_args()

    server = RedisServer()
    server.start()
    workdir = tempfile.TemporaryDirectory(prefix="admin-bench-")
    os.environ["REDIS_URL"] = server.url
    os.environ["DATABASE_PATH"] = str(Path(workdir.name) / "db.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
    try:
        run(server, args.records, args.runs)
    finally:
        server.stop()
        server.cleanup()
        workdir.cleanup()


def run(server: RedisServer, total: int, runs: int) -> None:
    import django
    from django.conf import settings

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import override_settings

    from django_ledger.conf import connection, get_ledger

    call_command("migrate", verbosity=0)
    ledger_setting = {
        "CONNECTION": server.url,
        "NAMESPACE": "bench",
        "QUEUES": {QUEUE: {"MAX_RECORDS": total + 1}},
    }
    with override_settings(LEDGER=ledger_setting, DEBUG=False):
        info = server.client().info("server")
        print(
            f"redis-server {info['redis_version']} on port {server.port}; Django {django.get_version()}; "
            f"Python {sys.version.split()[0]}; {os.cpu_count()} CPUs"
        )
        ledger = get_ledger(QUEUE)
        seconds = load(ledger, total)
        print(
            f"loaded {total:,} records in {seconds:.1f} s ({total / seconds:,.0f}/s) with admit_many"
        )
        used = server.client().info("memory")["used_memory_human"]
        print(f"redis used_memory: {used}")

        user = get_user_model()(username="bench", is_staff=True, is_superuser=True)
        user.set_unusable_password()
        user.save()
        client = Client()
        client.force_login(user)

        redis = connection()
        sent: list[Any] = []
        send = redis.execute_command

        def counting(*command: Any, **options: Any) -> Any:
            sent.append(command[0])
            return send(*command, **options)

        redis.execute_command = counting

        stats = ledger.stats()
        first_due = stats.oldest_due_at or stats.now
        batches = max(1, total // BATCH)
        low = first_due + (batches * 4 // 10) * 1000
        high = first_due + (batches * 5 // 10) * 1000
        url = "/admin/django_ledger/record/"
        deep = min(5000, max(1, total // 200))  # page 5,000 of a million; half-way of fewer
        inner = min(50, max(1, total // 2000))  # page 50 of the range's tenth of a million
        cases: list[tuple[str, dict[str, str], Callable[[str], bool]]] = [
            ("first page", {}, lambda text: "req-00000000" in text),
            (
                f"page {deep:,}",
                {"p": str(deep)},
                lambda text: f"req-{(deep - 1) * 100:08d}" in text,
            ),
            (
                f"due-time range, page {inner}",
                {**utc_params("due_at", low, high), "p": str(inner)},
                lambda text: "req-" in text,
            ),
            (
                "search by id",
                {"q": f"req-{total // 2:08d}"},
                lambda text: f"req-{total // 2:08d}" in text,
            ),
        ]
        rows = []
        for name, params, check in cases:
            response = client.get(url, params)  # warm: scripts loaded, caches filled
            assert response.status_code == 200, (name, response.status_code)
            assert check(response.content.decode()), name
            timings = []
            calls = 0
            for _ in range(runs):
                sent.clear()
                start = time.perf_counter()
                response = client.get(url, params)
                timings.append((time.perf_counter() - start) * 1000)
                calls = len(sent)
                assert response.status_code == 200
            tracemalloc.start()
            client.get(url, params)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rows.append((name, statistics.median(timings), max(timings), calls, peak / 1024 / 1024))
        redis.execute_command = send

    print()
    print(f"{'page':<26} {'median ms':>10} {'max ms':>8} {'redis calls':>12} {'peak MiB':>9}")
    for name, median, slowest, calls, peak in rows:
        print(f"{name:<26} {median:>10.1f} {slowest:>8.1f} {calls:>12} {peak:>9.2f}")
    _ = settings


if __name__ == "__main__":
    main()
