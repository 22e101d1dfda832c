"""Schedules stored at run time: one hash beside the scheduler's state, compare-and-set.

``{namespace}:schedule-defs`` holds, for each stored schedule ``K``, ``doc K`` (its
settings as JSON, in the shape of ``LEDGER['SCHEDULES'][K]``, with who saved it and
when) and ``ver K`` (its version, from 1), and ``stamp``, which moves at every change.
Every write is one script call (``lua/scripts/schedule_define.lua``) that checks the
version the writer read, so of two editors of one version the second is told of a
conflict; the state hash shares the hash tag, so a new or deleted schedule's state goes
in the same call, and an edit commits what the old timing owed with it. Each tick reads
the stamp with the state (``ScheduleStore.snapshot``) and reloads only when it moved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from ..scripts import call, script
from ..transport import Translate, text_of
from .state import Pending, ScheduleStore

__all__ = ["MAX_DOCUMENT_BYTES", "Definition", "Definitions", "Stored", "VersionConflict"]

#: The most bytes one stored schedule's JSON may take (its payload has its own limit).
MAX_DOCUMENT_BYTES: Final = 1_048_576


class VersionConflict(Exception):
    """The schedule's version is not the one the writer read: another write came first."""

    def __init__(self, key: str, expected: int | None, current: int) -> None:
        self.key, self.expected, self.current = key, expected, current
        super().__init__(
            f"schedule {key!r} is at version {current}, not {expected or 'absent'}: "
            "another change was saved first"
        )


@dataclass(frozen=True)
class Definition:
    """One stored schedule: its settings, version, and who saved it when."""

    key: str
    version: int
    entry: dict[str, Any]
    by: str = ""
    at_ms: int = 0


@dataclass
class Stored:
    """Every stored schedule, read in one round trip, at one stamp."""

    stamp: int = 0
    definitions: dict[str, Definition] = field(default_factory=dict)
    #: Keys whose document no writer of this module wrote.
    corrupt: list[str] = field(default_factory=list)


class Definitions:
    """Read and write the stored schedules of one namespace (on a ``ScheduleStore``)."""

    def __init__(self, store: ScheduleStore) -> None:
        self.store = store
        self.key = store.definitions_key
        self._define = script("schedule_define")

    def load(self) -> Stored:
        """Return every stored schedule and the stamp they are at."""
        with Translate(self.store):
            flat = self.store.redis.hgetall(self.key)
        fields = {text_of(name): text_of(value) for name, value in flat.items()}
        stored = Stored(int(fields.get("stamp", "0") or 0))
        for name, text in fields.items():
            if not name.startswith("doc "):
                continue
            key = name[4:]
            try:
                data = json.loads(text)
                stored.definitions[key] = Definition(
                    key,
                    int(fields.get(f"ver {key}", "0")),
                    dict(data["entry"]),
                    str(data.get("by", "")),
                    int(data.get("at", 0)),
                )
            except (ValueError, KeyError, TypeError):
                stored.corrupt.append(key)
        return stored

    def get(self, key: str) -> Definition | None:
        """Return the stored schedule ``key``, or ``None``."""
        return self.load().definitions.get(key)

    def put(
        self,
        definition: Definition,
        expected: int | None,
        *,
        through: tuple[int | None, int] | None = None,
        owed: Iterable[int] = (),
        pending: Pending | None = None,
        check_through: bool = True,
    ) -> tuple[str, int]:
        """Save ``definition`` over version ``expected`` (``None``: a new schedule).

        ``through``: (the ``through`` the caller read, the one to set) for an edit that
        decided what the old timing owed (``owed``, held ``pending``); a new schedule
        passes ``check_through=False``, its state being cleared first. Answer ("ok",
        the new version) or ("moved", 0) when a scheduler decided since that reading;
        raise ``VersionConflict`` when another write came first.
        """
        document = json.dumps(
            {"entry": definition.entry, "by": definition.by, "at": definition.at_ms},
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
        if len(document.encode()) > MAX_DOCUMENT_BYTES:
            raise ValueError(f"a stored schedule takes at most {MAX_DOCUMENT_BYTES:,} bytes")
        read, new = ("-", "") if through is None else (_opt(through[0]), str(through[1]))
        read = read if check_through else "-"
        args = ["put", definition.key, _opt(expected), document, read, new]
        args += [(pending or Pending("", 0)).to_json(), *map(str, owed)]
        return self._call(definition.key, expected, args)

    def delete(self, key: str, expected: int) -> None:
        """Delete ``key`` at version ``expected``, with its state (pause, pending fires)."""
        self._call(key, expected, ["delete", key, str(expected), "", "-", "", ""])

    def _call(self, key: str, expected: int | None, args: list[str]) -> tuple[str, int]:
        keys = (self.store.key, self.key)
        with Translate(self.store):
            status, version, _ = call(self.store.redis, self._define, keys, args)
        status = text_of(status)
        if status == "conflict":
            raise VersionConflict(key, expected, int(version))
        return status, int(version)


def _opt(value: int | None) -> str:
    return "" if value is None else str(value)
