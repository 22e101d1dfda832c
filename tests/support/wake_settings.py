"""Worker settings for the wake-up tests: ``tests.worker_settings`` plus a reference queue."""

from tests.support.worker_settings import *  # noqa: F403
from tests.support.worker_settings import LEDGER, H

LEDGER = {
    **LEDGER,
    "QUEUES": {**LEDGER["QUEUES"], "reference": {"HANDLER": H + "record", "OPTIMIZED": False}},
}
