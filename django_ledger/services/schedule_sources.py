"""Where the scheduler's schedules come from: the settings, and those stored at run time.

``schedules`` types ``LEDGER['SCHEDULES']``; ``stored`` reads the schedules stored at
run time and ``typed`` keeps those that run (run-time schedules on, no settings
schedule of that name, the checks passed). The scheduler, the operator's tools and
``runtime_schedules`` (which writes stored schedules) all read them here.
"""

from __future__ import annotations

import logging

from ..conf import connection, ledger_settings
from ..core.schedule import Definitions, ScheduleStore, Stored
from ..schedules.config import ScheduleConfig, configured_schedules, problems, schedule_of

__all__ = ["definitions", "schedules", "store", "stored", "typed"]

logger = logging.getLogger("django_ledger.scheduler")


def schedules(*, strict: bool = True) -> dict[str, ScheduleConfig]:
    """Return ``LEDGER['SCHEDULES']`` typed; ``strict`` raises on the first problem."""
    return configured_schedules(
        ledger_settings.schedules,
        ledger_settings.queues,
        strict=strict,
        defaults=ledger_settings.defaults,
    )


def store() -> ScheduleStore:
    """Return the scheduler's state store on the ledger's connection and namespace."""
    return ScheduleStore(connection(), ledger_settings.namespace)


def definitions() -> Definitions:
    """Return the stored schedules on the ledger's connection and namespace."""
    return Definitions(store())


def stored() -> Stored:
    """Return every stored schedule (for listings)."""
    return definitions().load()


def typed(found: Stored) -> dict[str, ScheduleConfig]:
    """Type the stored schedules that run; log the others.

    A stored schedule may stop passing after a deploy (its task renamed): it is left out,
    said in the log, and shown as not run in the admin, as a bad setting would be.
    """
    if not ledger_settings.runtime_schedules:
        return {}
    clash = set(schedules(strict=False))
    configs: dict[str, ScheduleConfig] = {}
    for key, definition in found.definitions.items():
        if key in clash:
            logger.error("stored schedule %r: LEDGER['SCHEDULES'] defines %r; not run", key, key)
            continue
        found_problems = problems(
            {key: definition.entry}, ledger_settings.queues, ledger_settings.defaults
        )
        if found_problems:
            logger.error("stored schedule %r not run: %s", key, found_problems[0].message)
            continue
        configs[key] = schedule_of(key, definition.entry, ledger_settings.queues)
    return configs
