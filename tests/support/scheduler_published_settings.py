"""Settings of a ``ledger_scheduler`` that runs a schedule the test process does not know.

The test project's settings, plus the schedule ``only-there`` and a fixed node id, so
the admin page of the test process (without it in its settings) can be seen listing it.
"""

import copy

from testproject.settings import *  # noqa: F403
from testproject.settings import LEDGER

LEDGER = copy.deepcopy(LEDGER)
LEDGER["SCHEDULES"] = {
    "only-there": {
        "TASK": "tests.support.tasks_app.tasks.noop",
        "CRON": "0 3 * * *",
        "TIMEZONE": "Europe/Paris",
    }
}
LEDGER["DISPATCH"] = {"NODE_ID": "published-node"}
