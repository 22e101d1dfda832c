"""What a bulk action acts on: the one parser of a filter the admin, the API and
``manage.py ledger_records`` share.

A filter names a queue, an action, states, a task and time ranges, as the records list
filters: each state's index is sorted by one time (PENDING by due time, CLAIMED by lease
expiry, the ended states by when they ended), so a range selects within the states that
time sorts. Anything the indexes cannot answer, an action that does not apply to a state
asked for, a task no module declares, a time that does not parse or a range that ends
before it starts is refused with one sentence; so is a queue the user may not act on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.dateparse import parse_datetime
from django.utils.module_loading import autodiscover_modules
from django.utils.translation import gettext

from ..conf import ledger_settings
from ..core.bulk import ACTIONS, APPLIES, Segment
from ..core.records import State
from ..tasks.registry import declared_paths

__all__ = [
    "BOUND_FIELDS",
    "PERMISSION",
    "BulkFilter",
    "BulkForbidden",
    "BulkRefused",
    "parse_filter",
]

#: The permission (``permissions.can``) each action needs on the queue.
PERMISSION = {"retry": "retry", "fail": "fail", "purge": "purge", "cancel": "operate"}
#: Each time a range may select on, and the states whose index it sorts.
BOUND_FIELDS: dict[str, tuple[State, ...]] = {
    "due_at": (State.PENDING,),
    "lease_until": (State.CLAIMED,),
    "updated_at": (State.COMPLETED, State.FAILED, State.DEAD),
}
#: The longest task path a filter may name (the script reads a payload's last 300 bytes).
_MAX_TASK = 250
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS_LIMIT = 2**53  # scores are doubles: beyond this they stop being exact


class BulkRefused(ValueError):
    """The filter or the action cannot be run: the message says why, nothing was done."""


class BulkForbidden(BulkRefused):
    """The user may not take this action on this queue."""


@dataclass(frozen=True)
class BulkFilter:
    """A validated filter and the action to take on what it matches."""

    queue: str
    action: str
    states: tuple[State, ...]
    task: str = ""
    #: Inclusive (low, high) epoch-ms bounds per time field (``BOUND_FIELDS``).
    bounds: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict)

    def segments(self) -> list[Segment]:
        """Each state to read, with the bounds of the time its index is sorted by."""
        out = []
        for state in self.states:
            low, high = next(
                (b for name, b in self.bounds.items() if state in BOUND_FIELDS[name]),
                (None, None),
            )
            out.append(Segment(state, low, high))
        return out

    def as_dict(self) -> dict[str, Any]:
        """The filter as JSON-ready values (stored with a run, written in its audit)."""
        return {
            "queue": self.queue,
            "action": self.action,
            "states": [state.value for state in self.states],
            "task": self.task,
            "bounds": {name: list(bound) for name, bound in sorted(self.bounds.items())},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BulkFilter:
        return cls(
            data["queue"],
            data["action"],
            tuple(State(value) for value in data["states"]),
            data.get("task", ""),
            {name: (low, high) for name, (low, high) in data.get("bounds", {}).items()},
        )


def parse_filter(
    queue: str,
    action: str,
    *,
    may: Callable[[str, str], bool],
    states: list[str] | None = None,
    task: str | None = None,
    bounds: Mapping[str, tuple[Any, Any]] | None = None,
) -> BulkFilter:
    """Validate a filter (``BulkRefused``, or ``BulkForbidden`` when ``may`` says no).

    ``may(permission, queue)`` answers for the user (``permissions.can``); ``bounds`` maps
    a time field (``BOUND_FIELDS``) to ``(after, before)``, each ``None``, epoch ms, or
    ISO 8601 text (without an offset: UTC).
    """
    if action not in ACTIONS:
        raise BulkRefused(
            gettext("%(action)r is not a bulk action (one of: %(actions)s)")
            % {"action": action, "actions": ", ".join(ACTIONS)}
        )
    if queue not in ledger_settings.queues:
        raise BulkRefused(gettext("no queue %(queue)r is configured") % {"queue": queue})
    if not may(PERMISSION[action], queue):
        raise BulkForbidden(
            gettext("you may not %(action)s records of queue %(queue)r")
            % {"action": action, "queue": queue}
        )
    applies = APPLIES[action]
    chosen = _states(states, action, applies)
    parsed: dict[str, tuple[int | None, int | None]] = {}
    for name, (after, before) in (bounds or {}).items():
        if name not in BOUND_FIELDS:
            raise BulkRefused(gettext("%(field)r is no time to filter by") % {"field": name})
        low, high = _ms(after, name), _ms(before, name)
        if low is None and high is None:
            continue
        if low is not None and high is not None and low > high:
            raise BulkRefused(
                gettext("the %(field)s range ends before it starts") % {"field": name}
            )
        sorted_states = [s for s in chosen if s in BOUND_FIELDS[name]]
        if not sorted_states:
            raise BulkRefused(
                gettext(
                    "a %(field)s range selects %(sorted)s records; the filter selects %(states)s"
                )
                % {
                    "field": name,
                    "sorted": "/".join(s.value for s in BOUND_FIELDS[name]),
                    "states": "/".join(s.value for s in chosen),
                }
            )
        parsed[name] = (low, high)
    if parsed and states is None:
        # No state named: the states the ranges sort (as the records list shows them).
        chosen = tuple(s for s in chosen if any(s in BOUND_FIELDS[n] for n in parsed))
    elif parsed:
        unsorted = [s for s in chosen if not any(s in BOUND_FIELDS[n] for n in parsed)]
        if unsorted:
            raise BulkRefused(
                gettext("no range given selects %(states)s records: name the states to act on")
                % {"states": "/".join(s.value for s in unsorted)}
            )
    return BulkFilter(queue, action, chosen, _task(task), parsed)


def _states(states: list[str] | None, action: str, applies: tuple[State, ...]) -> tuple[State, ...]:
    if not states:
        return applies
    chosen: list[State] = []
    for value in states:
        try:
            state = State(value)
        except ValueError:
            raise BulkRefused(
                gettext("%(value)r is not a record state") % {"value": value}
            ) from None
        if state not in applies:
            raise BulkRefused(
                gettext("%(action)s applies to %(applies)s records, not %(state)s")
                % {
                    "action": action,
                    "applies": "/".join(s.value for s in applies),
                    "state": state.value,
                }
            )
        if state not in chosen:
            chosen.append(state)
    return tuple(s for s in applies if s in chosen)


def _task(task: str | None) -> str:
    if not task:
        return ""
    # Each app's tasks module declares its tasks (the records list's task filter does so).
    with contextlib.suppress(ImportError, ImproperlyConfigured):
        autodiscover_modules("tasks")
    if len(task) > _MAX_TASK or task not in declared_paths():
        raise BulkRefused(gettext("no task %(task)r is declared") % {"task": task[:_MAX_TASK]})
    return task


def _ms(value: Any, name: str) -> int | None:
    """A bound as epoch ms: ``None``, an int, a datetime, or text of either."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise BulkRefused(gettext("%(value)r is not a time") % {"value": value})
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdecimal() and len(text) <= 17:
            value = int(text)
        else:
            try:
                parsed = parse_datetime(text)
            except ValueError:
                parsed = None
            if parsed is None:
                raise BulkRefused(
                    gettext("%(field)s: %(value)r is not a time (epoch ms or ISO 8601)")
                    % {"field": name, "value": value[:40]}
                )
            value = parsed
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        value = (aware - _EPOCH) // timedelta(milliseconds=1)
    if not isinstance(value, int):
        raise BulkRefused(gettext("%(value)r is not a time") % {"value": value})
    if not 0 <= value < _MS_LIMIT:
        raise BulkRefused(
            gettext("%(field)s: %(value)s is out of range (epoch ms from 0 to 2**53)")
            % {"field": name, "value": value}
        )
    return value
