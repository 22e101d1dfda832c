"""What every check module shares: the tag, and errors with stable ids."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.utils.module_loading import import_string

__all__ = ["DOCS", "RUN_TAG", "TAG", "error", "imported", "safe"]

TAG = "django_ledger"
#: The checks of what the ledger's commands run on (its settings, schedules, handlers and
#: task backends): a worker or a command runs these at start, not the whole project's
#: (its URLs, its admin), which ``manage.py check`` and the web server run.
RUN_TAG = "django_ledger_run"
DOCS = "see 'System checks' in the django-ledger docs"


def error(id_: int, msg: str, hint: str, obj: str) -> checks.Error:
    """Return the error ``django_ledger.E<id_>``."""
    return checks.Error(msg, hint=hint, obj=obj, id=f"django_ledger.E{id_:03d}")


def safe(spec: Any) -> str:
    """Show a connection spec without a password."""
    if isinstance(spec, str) and "://" in spec and "@" in spec:
        scheme, _, rest = spec.partition("://")
        return f"{scheme}://***@{rest.rpartition('@')[2]}"
    return repr(spec) if not isinstance(spec, str) else spec


def imported(path: str) -> tuple[Any, str | None]:
    """Return what ``path`` names, or ``None`` and why it does not import.

    Whatever a module raises at import is an answer, not an exception: a check reports,
    it never raises (``manage.py`` runs the checks before every command).
    """
    try:
        return import_string(path), None
    except ImportError as exc:
        return None, str(exc)
    except (Exception, SystemExit) as exc:
        return None, f"{type(exc).__name__}: {exc}"
