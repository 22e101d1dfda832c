"""Settings of ``tests.support.outbox_process``: the task tests' worker settings, and a database.

``DATABASE_PATH`` (read by the test project's settings) names a SQLite file; with
``LEDGER_TEST_PG`` (JSON: a ``DATABASES`` entry, ``tests/support/postgres_server.py``) the
``default`` database is that PostgreSQL cluster instead.
"""

import json
import os

from tests.support.tasks_app.settings import *  # noqa: F403

if os.environ.get("LEDGER_TEST_PG"):
    DATABASES = {"default": json.loads(os.environ["LEDGER_TEST_PG"])}
