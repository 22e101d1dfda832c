"""``tests.support.worker_settings`` with a project ``LOGGING``: the worker's lines go to a file.

``LEDGER_TEST_LOG_FILE`` names the file; ``LEDGER_TEST_LOGGER`` the logger that gets
the handler (``django_ledger`` unless set).
"""

import os

from tests.support.worker_settings import *  # noqa: F403

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(name)s|%(levelname)s|%(message)s"}},
    "handlers": {
        "file": {
            "class": "logging.FileHandler",
            "filename": os.environ["LEDGER_TEST_LOG_FILE"],
            "formatter": "plain",
        }
    },
    "loggers": {
        os.environ.get("LEDGER_TEST_LOGGER", "django_ledger"): {
            "handlers": ["file"],
            "level": "INFO",
        }
    },
}
