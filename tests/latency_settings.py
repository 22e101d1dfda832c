"""Settings for ``benchmarks/latency_bench.py``: the test project and the bench tasks app.

Django tasks on the ``default`` backend (``tests.bench_tasks_app``: no signal receivers)
and one ledger queue, ``default``, so ``ledger_worker`` with no arguments serves that
task queue alone. ``LEDGER_NAMESPACE`` and ``REDIS_URL`` come from the environment.
"""

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS, LEDGER

INSTALLED_APPS = [*INSTALLED_APPS, "tests.bench_tasks_app"]
LEDGER = {**LEDGER, "QUEUES": {"default": {}}}
