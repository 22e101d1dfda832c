"""``tests.bench_settings`` plus ``tests.quiet_tasks`` and its task queue ``quiet``.

For measuring Django tasks through the worker beside the raw ``bench`` queue in the
same process: the app connects no signal receivers (``tests.tasks_app`` does).
"""

from tests.support.bench_settings import *  # noqa: F403
from tests.support.bench_settings import INSTALLED_APPS, LEDGER, TASKS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.quiet_tasks"]
LEDGER = {**LEDGER, "QUEUES": {**LEDGER["QUEUES"], "quiet": {"MAX_RECORDS": 10_000_000}}}
_queues = TASKS["default"].get("QUEUES")
if _queues:  # an empty list takes any queue
    TASKS = {**TASKS, "default": {**TASKS["default"], "QUEUES": [*_queues, "quiet"]}}
