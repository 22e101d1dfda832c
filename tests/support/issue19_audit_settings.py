"""Worker settings of ``tests/worker/test_issue19_audit.py``: reference twins of two raw queues."""

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
