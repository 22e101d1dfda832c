"""Checks of the task backend: ``TASKS`` entries naming ``LedgerBackend``, and task options.

Importing this module needs no task framework: the backend's module is imported only
for a ``TASKS`` entry that names it, and a missing framework is itself reported.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from importlib import import_module
from typing import Any

import django
from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext, gettext_lazy

from ..queues import QUEUE_OPTION_KEYS
from ..tasks.backend_checks import backend_problems as _check_backend
from ..tasks.backend_checks import ledger_queues as _ledger_queues
from ..tasks.options import normalize_option
from .base import error as _error
from .base import imported

__all__ = ["check_outbox", "check_tasks", "check_tasks_once"]

#: The paths ``TASKS[...]['BACKEND']`` may name the backend by.
BACKEND_PATHS = frozenset(
    {"django_ledger.tasks.LedgerBackend", "django_ledger.tasks.backend.LedgerBackend"}
)


def check_tasks_once(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """``check_tasks``, leaving each backend to its own ``check()`` where Django runs it.

    The task framework's check runs every backend's ``check()``, which answers the same
    messages: so ``manage.py check`` says each once.
    """
    return check_tasks(app_configs, backends=not _framework_checks_backends(), **kwargs)


def _framework_checks_backends() -> bool:
    """Whether the task framework's own check (each backend's ``check()``) is registered."""
    registered = checks.registry.registry.get_checks(include_deployment_checks=True)
    return any(
        getattr(check, "__module__", "") in ("django.tasks.checks", "django_tasks.checks")
        for check in registered
    )


def check_tasks(
    app_configs: Sequence[Any] | None = None, *, backends: bool = True, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Check every ``LedgerBackend`` of ``TASKS`` and the task options of every queue.

    ``backends=False`` leaves out what each backend's own ``check()`` answers.
    """
    queues = _ledger_queues()
    errors: list[checks.CheckMessage] = list(_check_queue_options(queues))
    found = _ledger_backends()
    for alias, params in found:
        where = f"TASKS[{alias!r}]"
        missing = _missing_framework()
        if missing is not None:
            errors.append(
                _error(64, missing, gettext("pip install 'django-task-ledger[tasks]'."), where)
            )
            continue
        if backends:
            errors += _check_backend(where, params, queues)
    if errors or django.VERSION >= (6, 0) or not found:
        return errors
    if not apps.is_installed("django_tasks"):
        errors.append(
            checks.Warning(
                gettext(
                    "The django-tasks backport is not in INSTALLED_APPS: its log lines for task "
                    "signals, its checks and its reset on a changed TASKS setting are off."
                ),
                hint=gettext("Add 'django_tasks' to INSTALLED_APPS (Django 5.2 only)."),
                obj="INSTALLED_APPS",
                id="django_ledger.W060",
            )
        )
    return errors


def _ledger_backends() -> list[tuple[Any, dict[str, Any]]]:
    """The entries of ``TASKS`` that name a ``LedgerBackend``: (alias, params)."""
    tasks = getattr(settings, "TASKS", None)
    if not isinstance(tasks, dict):
        return []
    return [
        (alias, params)
        for alias, params in tasks.items()
        if isinstance(params, dict) and _is_ledger_backend(params.get("BACKEND"))
    ]


def _is_ledger_backend(path: Any) -> bool:
    if not isinstance(path, str):
        return False
    if path in BACKEND_PATHS:
        return True
    if _missing_framework() is not None:
        return False
    kind, why = imported(path)
    if why is not None:
        return False  # Django's own check of TASKS says so
    # A subclass of the backend, known by its bases' paths (no import of the backend's
    # module here: it needs the task framework).
    return isinstance(kind, type) and any(
        f"{base.__module__}.{base.__qualname__}" in BACKEND_PATHS for base in kind.__mro__
    )


def _missing_framework() -> str | None:
    try:
        import_module("django_ledger.tasks.compat")
    except ImproperlyConfigured as exc:
        return f"{exc}."
    return None


def _check_queue_options(queues: dict[str, dict[str, Any]]) -> Iterator[checks.CheckMessage]:
    for name, overrides in queues.items():
        seconds: dict[str, float] = {}
        for key, option in QUEUE_OPTION_KEYS.items():
            if overrides.get(key) is None:
                continue
            where = f"LEDGER['QUEUES'][{name!r}][{key!r}]"
            try:
                value = normalize_option(option, overrides[key])
            except (TypeError, ValueError) as exc:
                yield _error(63, f"{exc}.", str(_OPTION_HINTS[key]), where)
                continue
            if key in ("BACKOFF_BASE", "BACKOFF_CAP"):
                seconds[key] = value
        if seconds.get("BACKOFF_BASE", 0) > seconds.get("BACKOFF_CAP", float("inf")):
            yield _error(
                63,
                gettext(
                    "BACKOFF_BASE (%(backoff_base)s s) is more than BACKOFF_CAP (%(backoff_cap)s "
                    "s)."
                )
                % {
                    "backoff_base": f"{seconds['BACKOFF_BASE']:g}",
                    "backoff_cap": f"{seconds['BACKOFF_CAP']:g}",
                },
                gettext(
                    "The cap bounds every retry's wait, the first one's too: raise it or lower the "
                    "base."
                ),
                f"LEDGER['QUEUES'][{name!r}]",
            )


_OPTION_HINTS = {
    "BACKOFF_BASE": gettext_lazy(
        "Give a timedelta or a number of seconds more than 0 (the default is 5)."
    ),
    "BACKOFF_CAP": gettext_lazy(
        "Give a timedelta or a number of seconds more than 0 (the default is 600)."
    ),
    "RETRY_ON": gettext_lazy(
        "Give a list of exception classes or dotted paths, e.g. [ConnectionError]."
    ),
    "TIMEOUT": gettext_lazy("Give a timedelta or a number of seconds (0: no limit)."),
    "UNIQUE": gettext_lazy("Give True or False."),
}


def check_outbox(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """With ``--deploy``: outbox rows waiting past ``OUTBOX_MAX_AGE`` (W065), no table (W066).

    As Django's checks that read a database, it reads only the aliases of ``databases``
    (``check --deploy --database default``). W066: the outbox's database has not run
    ``migrate django_ledger``. A row that old means nothing delivers it: no ``ledger_worker`` (whose relay runs by
    default) nor ``ledger_relay`` is running, or Redis is away.
    """
    from django.db import DatabaseError
    from django.utils import timezone

    from ..outbox.models import OutboxEntry
    from ..outbox.options import transaction_options
    from ..outbox.tables import MISSING_HINT, table_exists

    databases = kwargs.get("databases") or ()
    if not databases:
        return []
    warnings: list[checks.CheckMessage] = []
    seen: set[str] = set()
    for alias, params in _ledger_backends():
        try:
            options = transaction_options(params.get("OPTIONS") or {})
        except (ValueError, TypeError):
            continue  # E065 says so
        if (
            options.mode != "outbox"
            or options.database in seen
            or options.database not in databases
        ):
            continue
        seen.add(options.database)
        exists = table_exists(options.database)
        if exists is None:
            continue  # unreachable: the database's own errors say so
        if not exists:
            warnings.append(
                checks.Warning(
                    gettext(
                        "Database %(database)r has no outbox table (%(db_table)s): enqueues inside "
                        "transaction.atomic() admit at once (as TRANSACTIONS 'immediate'), not with "
                        "the transaction."
                    )
                    % {"database": options.database, "db_table": OutboxEntry._meta.db_table},
                    hint=gettext("%(missing)s (see 'Transactions' in the django-ledger docs).")
                    % {"missing": f"{MISSING_HINT[0].upper()}{MISSING_HINT[1:]}"},
                    obj=f"TASKS[{alias!r}]",
                    id="django_ledger.W066",
                )
            )
            continue
        try:
            oldest = (
                OutboxEntry.objects.using(options.database)
                .order_by("created_at")
                .values_list("created_at", flat=True)
                .first()
            )
            waiting = OutboxEntry.objects.using(options.database).count() if oldest else 0
        except DatabaseError:
            continue  # no table yet (migrate has not run): nothing waits
        if oldest is None:
            continue
        age = (timezone.now() - oldest).total_seconds()
        if age > options.max_age:
            warnings.append(
                checks.Warning(
                    gettext(
                        "%(waiting)s task(s) wait in the outbox of database %(database)r, the oldest "
                        "for %(age)s s (more than OUTBOX_MAX_AGE, %(max_age)s s): nothing delivers "
                        "them."
                    )
                    % {
                        "waiting": f"{waiting:,}",
                        "database": options.database,
                        "age": f"{age:,.0f}",
                        "max_age": f"{options.max_age:,.0f}",
                    },
                    hint=gettext(
                        "Run ledger_worker (its relay is on unless --no-relay) or manage.py "
                        "ledger_relay --loop, and check that Redis is reachable."
                    ),
                    obj=f"TASKS[{alias!r}]",
                    id="django_ledger.W065",
                )
            )
    return warnings


def check_eager(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """With ``--deploy``: a ``LedgerBackend`` with ``OPTIONS['EAGER']`` on (W067).

    Eager runs each task in the process that enqueues it (a web request would run it):
    a setting for tests, never for a deployment.
    """
    return [
        checks.Warning(
            gettext(
                "OPTIONS['EAGER'] is on: every task runs in the process that enqueues it, "
                "not in a worker."
            ),
            hint=gettext("EAGER is for tests: leave it out of deployed settings (see 'Testing')."),
            obj=f"TASKS[{alias!r}]",
            id="django_ledger.W067",
        )
        for alias, params in _ledger_backends()
        if isinstance(params.get("OPTIONS"), dict) and params["OPTIONS"].get("EAGER") is True
    ]
