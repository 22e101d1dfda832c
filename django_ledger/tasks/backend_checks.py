"""What ``LedgerBackend.check()`` answers: a ``TASKS`` entry's queues and options.

E060 (a queue not in ``LEDGER['QUEUES']``), E061 (``OPTIONS``), E062 (``MAX_RESULT_BYTES``
past a queue's payload limit), E065 (the transaction options). The registered checks
(``checks/tasks.py``) answer the same for every backend where the task framework does
not run each backend's ``check()``. Importing this module needs no task framework.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.translation import gettext

from .. import defaults as setting
from ..outbox.options import TRANSACTION_OPTION_DEFAULTS, transaction_option_problem
from .options import BACKEND_OPTION_DEFAULTS, backend_option_problem

__all__ = ["backend_problems", "check_backend", "ledger_queues"]

_KNOWN_OPTIONS = {**BACKEND_OPTION_DEFAULTS, **TRANSACTION_OPTION_DEFAULTS}


def _error(id_: int, msg: str, hint: str, obj: str) -> checks.Error:
    """Return the error ``django_ledger.E<id_>`` (as ``checks/base.py``'s ``error``)."""
    return checks.Error(msg, hint=hint, obj=obj, id=f"django_ledger.E{id_:03d}")


def check_backend(alias: str, params: dict[str, Any]) -> list[checks.CheckMessage]:
    """Check one ``LedgerBackend`` of ``TASKS``: what its own ``check()`` answers."""
    return list(backend_problems(f"TASKS[{alias!r}]", params, ledger_queues()))


def ledger_queues() -> dict[str, dict[str, Any]]:
    raw = getattr(settings, "LEDGER", {})
    queues = raw.get("QUEUES", setting.TOP_DEFAULTS["QUEUES"]) if isinstance(raw, dict) else None
    if not isinstance(queues, dict):
        return {}  # check_settings says what is wrong with the shape
    return {
        name: overrides if isinstance(overrides, dict) else {} for name, overrides in queues.items()
    }


def backend_problems(
    where: str, params: dict[str, Any], queues: dict[str, dict[str, Any]]
) -> Iterator[checks.CheckMessage]:
    served = params.get("QUEUES", ["default"])
    if isinstance(served, list | tuple | set):
        for name in served:
            if name not in queues:
                known = ", ".join(repr(queue) for queue in queues) or "none"
                yield _error(
                    60,
                    gettext(
                        "Task queue %(name)r is not a queue of LEDGER['QUEUES'] (it has %(known)s)."
                    )
                    % {"name": name, "known": known},
                    gettext(
                        "Add %(name)r to LEDGER['QUEUES'] (e.g. {%(name)r: {}}), or remove it here."
                    )
                    % {"name": name},
                    f"{where}['QUEUES']",
                )
    options = params.get("OPTIONS", {})
    if not isinstance(options, dict):
        yield _error(
            61,
            gettext("OPTIONS must be a dict, not %(type)s.") % {"type": type(options).__name__},
            gettext("Give {'MAX_RESULT_BYTES': 65536} or leave OPTIONS out."),
            f"{where}['OPTIONS']",
        )
        return
    broken = False
    for key, value in options.items():
        if key in TRANSACTION_OPTION_DEFAULTS:
            problem = transaction_option_problem(key, value)
            if problem is not None:
                broken = True
                yield _error(
                    65,
                    f"{problem}.",
                    gettext(
                        "TRANSACTIONS: 'outbox' (the default), 'on_commit' or 'immediate'; DATABASE: "
                        "an alias of DATABASES; see 'Transactions' in the django-ledger docs."
                    ),
                    f"{where}['OPTIONS'][{key!r}]",
                )
            elif key == "DATABASE" and value not in settings.DATABASES:
                broken = True
                yield _error(
                    65,
                    gettext("DATABASE %(value)r is not an alias of DATABASES.") % {"value": value},
                    gettext("Name one of %(names)s.")
                    % {"names": ", ".join(map(repr, settings.DATABASES))},
                    f"{where}['OPTIONS'][{key!r}]",
                )
            continue
        problem = backend_option_problem(key, value)
        if problem is not None:
            broken = True
            yield _error(
                61,
                f"{problem[0].upper()}{problem[1:]}.",
                gettext("Known options: %(names)s; see 'Settings' in the django-ledger docs.")
                % {"names": ", ".join(sorted(_KNOWN_OPTIONS))},
                f"{where}['OPTIONS'][{key!r}]",
            )
    if broken:
        return
    limit = options.get("MAX_RESULT_BYTES", BACKEND_OPTION_DEFAULTS["MAX_RESULT_BYTES"])
    names = served if isinstance(served, list | tuple | set) and served else list(queues)
    for name in names:
        if name not in queues:
            continue
        payload_limit = _payload_limit(queues[name])
        if isinstance(payload_limit, int) and limit > payload_limit:
            yield _error(
                62,
                gettext(
                    "MAX_RESULT_BYTES (%(limit)s) is more than queue %(name)r allows: its "
                    "MAX_PAYLOAD_BYTES is %(payload_limit)s, and a result is bounded like a "
                    "payload."
                )
                % {"limit": f"{limit:,}", "name": name, "payload_limit": f"{payload_limit:,}"},
                gettext(
                    "Lower MAX_RESULT_BYTES to at most %(payload_limit)s, or raise the queue's "
                    "MAX_PAYLOAD_BYTES."
                )
                % {"payload_limit": f"{payload_limit:,}"},
                f"{where}['OPTIONS']['MAX_RESULT_BYTES']",
            )


def _payload_limit(overrides: dict[str, Any]) -> Any:
    if "MAX_PAYLOAD_BYTES" in overrides:
        return overrides["MAX_PAYLOAD_BYTES"]
    raw = getattr(settings, "LEDGER", {})
    defaults = raw.get("DEFAULTS") if isinstance(raw, dict) else None
    if isinstance(defaults, dict) and "MAX_PAYLOAD_BYTES" in defaults:
        return defaults["MAX_PAYLOAD_BYTES"]
    return setting.DEFAULTS["MAX_PAYLOAD_BYTES"]
