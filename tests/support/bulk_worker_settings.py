"""The worker settings plus the bulk tests' queue: each attempt fails, one attempt only.

A record the worker takes ends FAILED at once, after the bulk run began: what a run over
FAILED records must never match a second time.
"""

from tests.support.worker_settings import *  # noqa: F403
from tests.support.worker_settings import LEDGER

LEDGER = {
    **LEDGER,
    "QUEUES": {
        **LEDGER["QUEUES"],
        "dying": {"HANDLER": "tests.support.worker_handlers.fail", "MAX_ATTEMPTS": 1},
    },
}
