"""Worker settings with reference twins (``OPTIMIZED: False``) of two raw queues.

``raw_ref`` and ``blocking_ref`` are ``raw`` and ``blocking`` of ``worker_settings`` on
the reference path: a worker test runs on either twin to hold in both ledger modes.
"""

from tests.support.worker_settings import *  # noqa: F403
from tests.support.worker_settings import LEDGER

LEDGER = {
    **LEDGER,
    "QUEUES": {
        **LEDGER["QUEUES"],
        "raw_ref": {**LEDGER["QUEUES"]["raw"], "OPTIMIZED": False},
        "blocking_ref": {**LEDGER["QUEUES"]["blocking"], "OPTIMIZED": False},
    },
}
