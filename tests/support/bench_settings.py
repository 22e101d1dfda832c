"""Settings for the worker processes the benchmarks and the worker conservation run start.

The test project plus raw queues whose handlers are in ``tests.support.bench_handlers``:

* ``bench``: a no-op (``benchmarks/worker_bench.py``);
* ``conserve``: records each run in a log file (``benchmarks/worker_conservation.py``
  and ``tests/worker/test_worker_conservation.py``), with a 2 s lease so that a dead worker's
  runs come back within seconds;
* ``bench_tasks``: a Django task queue (``tests.support.tasks_app``'s ``noop``), only with
  ``BENCH_TASKS=1`` in the environment, so that the raw queues never depend on the
  task backend loading.

``LEDGER_NAMESPACE`` and ``REDIS_URL`` come from the environment, as in
``testproject.settings``.
"""

import os

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS, LEDGER, TASKS

H = "tests.support.bench_handlers."

LEDGER = {
    **LEDGER,
    "QUEUES": {
        **LEDGER["QUEUES"],
        "bench": {"HANDLER": H + "noop", "MAX_RECORDS": 10_000_000},
        "conserve": {
            "HANDLER": H + "record_run",
            "LEASE": 2,
            "MAX_ATTEMPTS": 16,
            "MAX_RECORDS": 10_000_000,
            "RETENTION": 30 * 86_400,
        },
    },
}

if os.environ.get("BENCH_TASKS") == "1":
    INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.tasks_app"]
    LEDGER["QUEUES"]["bench_tasks"] = {"MAX_RECORDS": 10_000_000}
    _queues = TASKS["default"].get("QUEUES")
    if _queues:  # an empty list takes any queue
        _queues = [*_queues, "bench_tasks"]
        TASKS = {**TASKS, "default": {**TASKS["default"], "QUEUES": _queues}}
