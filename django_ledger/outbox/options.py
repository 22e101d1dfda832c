"""The backend's transaction options: ``TRANSACTIONS``, ``DATABASE``, ``OUTBOX_MAX_AGE``,
``OUTBOX_DELIVERY``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DELIVERIES",
    "MODES",
    "TRANSACTION_OPTION_DEFAULTS",
    "TransactionOptions",
    "transaction_option_problem",
    "transaction_options",
]

#: What an enqueue inside ``transaction.atomic()`` does (``docs/transactions.md``).
MODES = ("outbox", "on_commit", "immediate")
#: Who admits an outbox's rows after the commit (``outbox/courier.py``).
DELIVERIES = ("background", "inline")

TRANSACTION_OPTION_DEFAULTS: dict[str, Any] = {
    # outbox: a row in the caller's transaction, admitted on commit or by a relay.
    "TRANSACTIONS": "outbox",
    # The database alias whose transactions an enqueue joins, and where the outbox lives.
    "DATABASE": "default",
    # Seconds an outbox row may wait before the deploy check warns (no relay running?).
    "OUTBOX_MAX_AGE": 300,
    # background: the process's courier thread admits committed rows in batches, and the
    # commit returns at once (SQLite: inline); inline: the committing thread does.
    "OUTBOX_DELIVERY": "background",
}


@dataclass(frozen=True, slots=True)
class TransactionOptions:
    mode: str
    database: str
    max_age: float
    delivery: str = "background"


def transaction_option_problem(name: str, value: Any) -> str | None:
    """Say what is wrong with one transaction option, or ``None``."""
    if name == "TRANSACTIONS" and value not in MODES:
        return f"TRANSACTIONS must be one of {', '.join(map(repr, MODES))}, got {value!r}"
    if name == "DATABASE" and (not isinstance(value, str) or not value):
        return f"DATABASE must be a database alias (a non-empty str), got {value!r}"
    if name == "OUTBOX_MAX_AGE" and (
        isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
    ):
        return f"OUTBOX_MAX_AGE must be a number of seconds more than 0, got {value!r}"
    if name == "OUTBOX_DELIVERY" and value not in DELIVERIES:
        return f"OUTBOX_DELIVERY must be one of {', '.join(map(repr, DELIVERIES))}, got {value!r}"
    return None


def transaction_options(options: Mapping[str, Any]) -> TransactionOptions:
    """Return a backend's transaction options; ``ValueError`` saying which is wrong."""
    for name in TRANSACTION_OPTION_DEFAULTS:
        if name in options:
            problem = transaction_option_problem(name, options[name])
            if problem is not None:
                raise ValueError(problem)
    merged = {**TRANSACTION_OPTION_DEFAULTS, **options}
    return TransactionOptions(
        merged["TRANSACTIONS"],
        merged["DATABASE"],
        float(merged["OUTBOX_MAX_AGE"]),
        merged["OUTBOX_DELIVERY"],
    )
