"""Settings of the worker processes the task tests start: the test project's, plus this app.

The worker finds a payload's task only in an installed app's package (or a module it
already imported), so the app holding the tests' tasks is installed here. Leases are
short, so that a time-out (checked at each renewal) and the repair of a dead worker's
task come within about a second.
"""

import copy

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS, LEDGER

INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.tasks_app"]

LEDGER = copy.deepcopy(LEDGER)
for _overrides in LEDGER["QUEUES"].values():
    _overrides["LEASE"] = 3
