"""The scheduler's Django-free core: fires, misfire policy, shared state, ticks, the loop.

``fires`` computes when a cron expression (in a time zone) or an interval fires;
``misfire`` decides which due fires to admit; ``state`` keeps each schedule's state in
Redis with compare-and-set writes (and, with ``running``, what each node runs); ``ticker`` runs one tick (decide, claim the
dispatch, admit); ``loop`` ticks until stopped. The Django layer
(``django_ledger.schedules``, ``django_ledger.services.scheduler``) builds them from
``LEDGER['SCHEDULES']``; ``docs/scheduler.md`` explains the design.
"""

from .definitions import Definition, Definitions, Stored, VersionConflict
from .fires import (
    MACROS,
    MAX_INTERVAL_S,
    At,
    BadTiming,
    Cron,
    Every,
    Timing,
    datetime_of,
    epoch_of,
    zone_of,
)
from .loop import SchedulerLoop
from .misfire import MAX_FIRES, ON_TIME_MS, Decision, Misfire, decide
from .running import MAX_PUBLISHED, PUBLISH_TTL_MS, Running
from .state import Pause, Pending, ScheduleStore, Snapshot, definitions_key, state_key
from .ticker import (
    FIRE_LEASE_MS,
    Admit,
    Fire,
    FireEvent,
    Outcome,
    Schedule,
    Ticker,
    TickReport,
)

__all__ = [
    "FIRE_LEASE_MS",
    "MACROS",
    "MAX_FIRES",
    "MAX_INTERVAL_S",
    "MAX_PUBLISHED",
    "ON_TIME_MS",
    "PUBLISH_TTL_MS",
    "Admit",
    "At",
    "BadTiming",
    "Cron",
    "Decision",
    "Definition",
    "Definitions",
    "Every",
    "Fire",
    "FireEvent",
    "Misfire",
    "Outcome",
    "Pause",
    "Pending",
    "Running",
    "Schedule",
    "ScheduleStore",
    "SchedulerLoop",
    "Snapshot",
    "Stored",
    "TickReport",
    "Ticker",
    "Timing",
    "VersionConflict",
    "datetime_of",
    "decide",
    "definitions_key",
    "epoch_of",
    "state_key",
    "zone_of",
]
