"""``tests.bench_settings`` plus the task queue ``wfbench`` of ``benchmarks/workflow_bench.py``.

Its tasks are in ``tests.workflow_bench_app`` (an app that connects no signal receivers).
``LEDGER_NAMESPACE`` and ``REDIS_URL`` come from the environment.
"""

from tests.support.bench_settings import *  # noqa: F403
from tests.support.bench_settings import INSTALLED_APPS, LEDGER, TASKS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.workflow_bench_app"]

LEDGER = {**LEDGER, "QUEUES": {**LEDGER["QUEUES"], "wfbench": {"MAX_RECORDS": 10_000_000}}}
_queues = TASKS["default"].get("QUEUES")
if _queues:  # an empty list takes any queue
    TASKS = {**TASKS, "default": {**TASKS["default"], "QUEUES": [*_queues, "wfbench"]}}
