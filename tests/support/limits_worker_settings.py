"""Settings for the limits' worker processes: two limited raw queues (tests/worker/test_limits_worker.py)."""

from testproject.settings import *  # noqa: F403
from testproject.settings import LEDGER

H = "tests.support.limits_worker_handlers."

LEDGER = {
    **LEDGER,
    "QUEUES": {
        **LEDGER["QUEUES"],
        "narrow": {"HANDLER": H + "overlap", "CONCURRENCY": 2},
        "metered": {"HANDLER": H + "stamp", "RATE": {"LIMIT": 20, "PERIOD": 1, "BURST": 5}},
        "payments": {"HANDLER": H + "stamp", "RATE": {"LIMIT": 50, "PERIOD": 1, "BURST": 10}},
        "exports": {"HANDLER": H + "overlap", "CONCURRENCY": 3},
        "tenants": {"HANDLER": H + "overlap_by_key", "CONCURRENCY": 2, "KEY": "kwargs.tenant_id"},
        "fair": {"HANDLER": H + "order", "KEY": "kwargs.tenant_id"},
        "bytask": {
            "HANDLER": H + "overlap_by_key",
            "CONCURRENCY": 3,
            "KEY": "task",
            "KEY_LIMITS": {"shop.tasks.export": {"CONCURRENCY": 1}},
        },
        "stuck": {
            "HANDLER": H + "hang_first",
            "CONCURRENCY": 1,
            "KEY": "kwargs.tenant_id",
            "LEASE": 2,
        },
    },
}
