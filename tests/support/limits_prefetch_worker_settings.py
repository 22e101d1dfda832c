"""Settings for tests/worker/test_limits_prefetch_worker.py: a rate-limited raw queue whose
tasks record their start."""

from testproject.settings import *  # noqa: F403
from testproject.settings import LEDGER

LEDGER = {
    **LEDGER,
    "QUEUES": {
        **LEDGER["QUEUES"],
        "paced": {
            "HANDLER": "tests.support.limits_prefetch_handlers.started",
            "RATE": {"LIMIT": 100, "PERIOD": 1, "BURST": 40},
        },
    },
}
