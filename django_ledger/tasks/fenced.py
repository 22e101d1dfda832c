"""``effects(context)`` and ``StaleAttempt`` for ``django_ledger.tasks``: fenced effects.

They live in ``django_ledger/outbox/effects.py``; ``docs/transactions.md`` is the guide.
"""

from __future__ import annotations

from ..outbox.effects import Effects, StaleAttempt, effects

__all__ = ["Effects", "StaleAttempt", "effects"]
