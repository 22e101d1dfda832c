"""The task tests' worker settings, plus raw queues whose handlers end with a BaseException."""

from tests.support.tasks_app.settings import *  # noqa: F403
from tests.support.tasks_app.settings import LEDGER

#: The raw queues of ``tests.support.tasks_app.escapes`` (the test process adds the same).
ESCAPE_QUEUES = {
    "raw_escapes": {
        "HANDLER": "tests.support.tasks_app.escapes.raw_escape",
        "MAX_ATTEMPTS": 2,
        "BACKOFF_BASE": 0.001,
        "BACKOFF_CAP": 0.002,
    },
    "raw_escapes_async": {
        "HANDLER": "tests.support.tasks_app.escapes.async_raw_escape",
        "MAX_ATTEMPTS": 2,
        "BACKOFF_BASE": 0.001,
        "BACKOFF_CAP": 0.002,
    },
}

LEDGER["QUEUES"].update({name: dict(queue, LEASE=3) for name, queue in ESCAPE_QUEUES.items()})

#: A raw queue whose handler always raises, with a backoff long enough to measure.
LEDGER["QUEUES"]["raw_backoff"] = {
    "HANDLER": "tests.support.worker_handlers.fail",
    "MAX_ATTEMPTS": 3,
    "BACKOFF_BASE": 60,
    "BACKOFF_CAP": 60,
    "LEASE": 3,
}
