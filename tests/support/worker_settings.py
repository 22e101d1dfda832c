"""Settings for worker processes the tests start: the test project plus raw queues.

``LEDGER_NAMESPACE`` (each test's own) and ``REDIS_URL`` (the suite's server) come from
the environment, as in ``testproject.settings``.
"""

from datetime import timedelta

from testproject.settings import *  # noqa: F403
from testproject.settings import LEDGER

H = "tests.support.worker_handlers."

LEDGER = {
    **LEDGER,
    "QUEUES": {
        **LEDGER["QUEUES"],
        "raw": {"HANDLER": H + "record"},
        "sharded": {"HANDLER": H + "record", "SHARDS": 3},
        "failing": {
            "HANDLER": H + "fail",
            "MAX_ATTEMPTS": 3,
            "BACKOFF_BASE": 0.05,
            "BACKOFF_CAP": 0.2,
        },
        "blocking": {"HANDLER": H + "wait_for_release", "LEASE": timedelta(seconds=2)},
        "hanging": {"HANDLER": H + "first_attempt_hangs", "TIMEOUT": 1, "BACKOFF_BASE": 0.05},
        "hanging_c": {
            "HANDLER": H + "first_attempt_hangs_in_c",
            "TIMEOUT": 1,
            "BACKOFF_BASE": 0.05,
        },
        "slow": {"HANDLER": H + "outlives_its_lease", "LEASE": timedelta(seconds=1)},
        "async": {"HANDLER": H + "coroutine"},
        "filewait": {"HANDLER": H + "wait_for_file", "LEASE": timedelta(seconds=1)},
        "hoarding": {"HANDLER": H + "hoard"},
    },
}
