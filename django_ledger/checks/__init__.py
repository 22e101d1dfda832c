"""System checks of the ``LEDGER`` setting and, with ``--deploy``, of Redis itself.

Every message has a stable id (``django_ledger.E001`` ...), listed with its fix in
``docs/checks.md``. ``register_checks`` runs from ``LedgerConfig.ready()``. One module
per thing checked: ``settings`` (the ``LEDGER`` setting), ``connection`` (its connection
specs), ``installed`` (the apps beside this one), ``servers`` (Redis itself, with
``--deploy``).
"""

from __future__ import annotations

from django.core import checks

from .base import RUN_TAG, TAG
from .installed import check_api, check_rangefilter
from .servers import check_redis
from .settings import check_settings
from .worker import check_handlers

__all__ = [
    "check_api",
    "check_handlers",
    "check_rangefilter",
    "check_redis",
    "check_settings",
    "register_checks",
]


def register_checks() -> None:
    """Register the checks (called once, from ``AppConfig.ready``)."""
    checks.register(check_settings, TAG, RUN_TAG)
    from .schedules import check_schedules  # LEDGER['SCHEDULES'], E070 to E079

    checks.register(check_schedules, TAG, RUN_TAG)
    checks.register(check_handlers, TAG, RUN_TAG)
    # TASKS' LedgerBackends and task options: E060-E065, W060; the outbox: W065, W066.
    from .tasks import check_eager, check_outbox, check_tasks_once

    checks.register(check_tasks_once, TAG, RUN_TAG)
    # Tagged "database": Django runs it only for the aliases given with --database
    # (Django 6 hands every check all aliases otherwise).
    checks.register(check_outbox, TAG, checks.Tags.database, deploy=True)
    checks.register(check_eager, TAG, deploy=True)  # W067: OPTIONS['EAGER'] is for tests
    checks.register(check_rangefilter, TAG)
    checks.register(check_api, TAG, checks.Tags.urls)
    checks.register(check_redis, TAG, deploy=True)
