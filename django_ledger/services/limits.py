"""Reading and changing a queue's flow limits at run time (``manage.py ledger_limits``).

The limits live in Redis (the settings are their default, written by ``get_ledger``);
a change here holds for every worker from its next claim, with no restart, and stays
over the settings until reset. docs/limits.md describes the model.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Any

from ..conf import get_ledger, ledger_settings
from ..core.limits import MAX_PERIOD_MS, Limits, LimitUse, Rate

__all__ = ["LimitChange", "change_limits", "describe", "parse_rate"]

logger = logging.getLogger("django_ledger.limits")

_RATE = re.compile(r"(\d+)/(\d+(?:\.\d+)?)(?:/(\d+))?", re.ASCII)
#: ``LimitChange`` fields left at this keep what is stored.
KEEP = "keep"


@dataclass(frozen=True)
class LimitChange:
    """What to change: a ``Rate``, ``None`` (remove it) or ``KEEP``, the same for
    concurrency; ``reset`` puts the settings' limits back first."""

    rate: Rate | str | None = KEEP
    concurrency: int | str | None = KEEP
    reset: bool = False

    @property
    def changes(self) -> bool:
        return self.reset or self.rate != KEEP or self.concurrency != KEEP


def parse_rate(text: str) -> Rate:
    """Parse ``LIMIT/PERIOD[/BURST]`` (``PERIOD`` in seconds): ``10/1``, ``100/60/20``.

    Every part is checked against its bounds (``ValueError``), before anything is stored.
    """
    text = text.strip()
    match = _RATE.fullmatch(text) if len(text) <= 60 else None
    if match is None:
        raise ValueError(
            f"a rate is LIMIT/PERIOD[/BURST], e.g. 10/1 or 100/60/20, got {text[:60]!r}"
        )
    seconds = float(match[2])
    if not 0.001 <= seconds <= MAX_PERIOD_MS / 1000:
        raise ValueError(
            f"a rate's PERIOD is from 0.001 to {MAX_PERIOD_MS // 1000:,} seconds, got {match[2]}"
        )
    limit = int(match[1])
    burst = int(match[3]) if match[3] else limit
    return Rate(limit, round(seconds * 1000), burst)


def change_limits(queue: str, change: LimitChange, actor: str = "") -> LimitUse:
    """Apply ``change`` to ``queue``'s stored limits and answer them with their use.

    Raises ``ValueError`` for a change that cannot hold (a sharded queue) and
    ``ImproperlyConfigured`` for an unknown queue; nothing is written then.
    """
    config = ledger_settings.queue(queue)
    ledger = get_ledger(queue)
    if not change.changes:
        return ledger.limits()
    # The new limits are built (and checked) in full before anything is written.
    given: dict[str, Any] = {
        name: value
        for name, value in (("rate", change.rate), ("concurrency", change.concurrency))
        if value != KEEP
    }
    limits = replace(config.limits if change.reset else ledger.limits().limits, **given)
    if change.reset:
        ledger.set_limits(config.limits, source="settings", force=True)
    if given:  # what the operator gave holds over the settings
        ledger.set_limits(limits, source="operator", force=True)
    logger.info(
        "limits of %s set by %s: %s%s",
        queue,
        actor or "an operator",
        describe(limits),
        "" if given else " (the settings')",
    )
    return ledger.limits()


def describe(limits: Limits) -> str:
    parts = []
    if limits.rate is not None:
        parts.append(f"rate {limits.rate}")
    if limits.concurrency is not None:
        parts.append(f"concurrency {limits.concurrency}")
    text = ", ".join(parts) or "no limits"
    if limits.key is not None:
        text += f" per key {limits.key}"
    return text
