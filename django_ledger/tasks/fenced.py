"""The outbox's faces for ``django_ledger.tasks``: fenced effects and ``flush_outbox``.

``effects(context)`` and ``StaleAttempt`` live in ``django_ledger/outbox/effects.py``,
``flush_outbox`` (wait for the courier's deliveries) in ``outbox/courier.py``;
``docs/transactions.md`` is the guide.
"""

from __future__ import annotations

from ..outbox.courier import flush as flush_outbox
from ..outbox.effects import Effects, StaleAttempt, effects

__all__ = ["Effects", "StaleAttempt", "effects", "flush_outbox"]
