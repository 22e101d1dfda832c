"""One thing wrong with ``LEDGER['SCHEDULES']``, as the checks and the scheduler report it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Problem", "where"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with ``LEDGER['SCHEDULES']``: its check id number, words and place."""

    id: int
    message: str
    hint: str
    where: str


def where(key: str, name: str | None = None) -> str:
    """Return the place of schedule ``key`` (or of its setting ``name``) in the settings."""
    place = f"LEDGER['SCHEDULES'][{key!r}]"
    return place if name is None else f"{place}[{name!r}]"
