"""Whether a database has the outbox's table: ``migrate django_ledger`` has run there.

Looked up once per database per process by introspection (a catalog query, harmless
inside the caller's transaction, unlike a failed ``SELECT`` that aborts a PostgreSQL
transaction), and again after ``RECHECK`` seconds while missing, so that a process
started before ``migrate`` picks the table up. A database without it gets one warning
per process: enqueues inside ``transaction.atomic()`` then admit at once (as
``TRANSACTIONS: "immediate"``), ``get_result`` reads no outbox and no relay serves it.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import DatabaseError, connections

from .models import OutboxEntry

__all__ = ["MISSING_HINT", "RECHECK", "forget_tables", "outbox_ready", "table_exists"]

logger = logging.getLogger("django_ledger.outbox")

#: Seconds before a database found without the table is looked at again.
RECHECK = 60.0
MISSING_HINT = "run manage.py migrate django_ledger"

_lock = threading.Lock()
#: (alias, database name) -> (the table exists, when that was seen, monotonic).
_seen: dict[tuple[str, str], tuple[bool, float]] = {}
_warned: set[tuple[str, str]] = set()


def outbox_ready(database: str) -> bool:
    """Whether ``database`` has the outbox table; ``False`` (not kept) if it is unreachable."""
    connection = connections[database]
    key = (database, str(connection.settings_dict.get("NAME")))
    now = time.monotonic()
    seen = _seen.get(key)
    if seen is not None and (seen[0] or now - seen[1] < RECHECK):
        return seen[0]
    exists = table_exists(database)
    if exists is None:
        return False  # the database is away: no outbox to read now; ask again next time
    with _lock:
        _seen[key] = (exists, now)
        warn = not exists and key not in _warned
        if warn:
            _warned.add(key)
    if warn:
        logger.warning(
            "outbox: database %r has no table %r (%s): enqueues inside "
            "transaction.atomic() admit at once, as TRANSACTIONS 'immediate', and no "
            "relay serves it",
            database,
            OutboxEntry._meta.db_table,
            MISSING_HINT,
        )
    return exists


def table_exists(database: str) -> bool | None:
    """Whether ``database`` has the outbox table now; ``None`` if it cannot be reached."""
    connection = connections[database]
    try:
        with connection.cursor() as cursor:
            names = connection.introspection.table_names(cursor)
    except DatabaseError:
        return None
    return OutboxEntry._meta.db_table in names


def forget_tables() -> None:
    """Forget what was seen (and warned): for tests that create or drop the table."""
    with _lock:
        _seen.clear()
        _warned.clear()
