"""What an admin query asks for: the ORM lookups of the stock admin, as a plain spec.

The stock ``ChangeList``, list filters, search and actions call ``filter`` with
keyword lookups and ``Q`` objects. Only lookups the Redis indexes can answer are
understood; any other raises ``UnsupportedLookup`` (a ``ValueError``, which the
admin turns into its normal "incorrect lookup" error page).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext

from ..core.records import State

__all__ = [
    "ALL_STATES",
    "SCORE_FIELD",
    "Spec",
    "UnsupportedLookup",
    "join_key",
    "split_key",
    "to_ms",
]

#: The order states are listed in when no state filter narrows the list.
ALL_STATES = (State.PENDING, State.CLAIMED, State.COMPLETED, State.FAILED, State.DEAD)
#: The field each state's index is scored by: the only time a range can select on.
SCORE_FIELD = {
    State.PENDING: "due_at",
    State.CLAIMED: "lease_until",
    State.COMPLETED: "updated_at",
    State.FAILED: "updated_at",
    State.DEAD: "updated_at",
}
_TIME_FIELDS = frozenset(SCORE_FIELD.values())
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_MS_LIMIT = 2**53  # scores are doubles: beyond this they stop being exact


class UnsupportedLookup(ValueError):
    """A lookup the Redis indexes cannot answer."""


def join_key(queue: str, request_id: str) -> str:
    """Return the admin key of a record: its queue, a space, its request id."""
    return f"{queue} {request_id}"


def split_key(key: object) -> tuple[str, str] | None:
    """Return ``(queue, request_id)`` of an admin key, or ``None`` if it is not one."""
    if not isinstance(key, str):
        return None
    queue, space, request_id = key.partition(" ")
    if not space or not queue or not request_id:
        return None
    return queue, request_id


def to_ms(value: object) -> int:
    """Turn a bound (epoch ms, a datetime, or text of either) into epoch milliseconds."""
    ms: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        ms = value
    elif isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        ms = (aware - _EPOCH) // _ONE_MS
    elif isinstance(value, str) and value.strip().lstrip("-").isdecimal():
        ms = int(value.strip())
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            parsed = parse_datetime(value.strip())
            if parsed is not None:
                return to_ms(parsed)
    if ms is None:
        raise UnsupportedLookup(gettext("%(value)r is not a time") % {"value": value})
    return max(-_MS_LIMIT, min(_MS_LIMIT, ms))


Ident = tuple[str | None, str]  # (queue, or None for any queue; request id)


@dataclass(frozen=True)
class Spec:
    """Which records a query selects, and in which order."""

    queues: tuple[str, ...]
    states: tuple[State, ...] = ALL_STATES
    #: Exact records asked for (search, ``pk__in``, ``get``); ``None`` when not narrowed.
    idents: frozenset[Ident] | None = None
    #: Inclusive (low, high) epoch-ms bounds per time field.
    bounds: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict)
    descending: bool = False
    empty: bool = False

    def segments(self) -> list[tuple[State, int | None, int | None]]:
        """Return each state to read with its score bounds, in list order."""
        if self.empty:
            return []
        out = []
        for state in self.states:
            score_field = SCORE_FIELD[state]
            # A range on another time field cannot be answered from this state's index.
            if any(name != score_field for name in self.bounds):
                continue
            low, high = self.bounds.get(score_field, (None, None))
            if low is not None and high is not None and low > high:
                continue
            out.append((state, low, high))
        return out

    def matches(self, queue: str, state: State | None, score: int | None) -> bool:
        """Return whether a record read by id belongs to this query's result."""
        if self.empty or queue not in self.queues:
            return False
        if state is None:  # bytes that do not decode: only an unfiltered lookup shows them
            return not self.bounds and set(self.states) == set(ALL_STATES)
        for seg_state, low, high in self.segments():
            if seg_state is state:
                return (
                    score is not None
                    and (low is None or score >= low)
                    and (high is None or score <= high)
                )
        return False

    # -- narrowing ----------------------------------------------------------------

    def narrow_q(self, q: Q) -> Spec:
        """Apply a ``Q`` object: AND of lookups, or OR of values of one lookup."""
        if q.negated:
            raise UnsupportedLookup("negated lookups are not supported")
        children = list(q.children)
        if q.connector == Q.OR and len(children) > 1:
            pairs = [child for child in children if isinstance(child, tuple) and len(child) == 2]
            lookups = {str(lookup) for lookup, _ in pairs}
            if len(pairs) != len(children) or len(lookups) != 1:
                raise UnsupportedLookup("OR is supported only between values of one lookup")
            lookup = lookups.pop()
            if not lookup.endswith("__exact") and "__" in lookup:
                raise UnsupportedLookup(f"OR of {lookup!r} is not supported")
            name = lookup.removesuffix("__exact") + "__in"
            return self.narrow(name, [value for _, value in pairs])
        spec = self
        for child in children:
            if isinstance(child, Q):
                spec = spec.narrow_q(child)
            elif isinstance(child, tuple) and len(child) == 2:
                spec = spec.narrow(child[0], child[1])
            else:
                raise UnsupportedLookup(f"unsupported filter {child!r}")
        return spec

    def narrow(self, lookup: str, value: Any) -> Spec:
        """Apply one keyword lookup."""
        name, _, op = lookup.partition("__")
        op = op or "exact"
        if name == "pk":
            name = "key"
        if name in ("key", "request_id", "queue", "state") and op in ("exact", "in"):
            values = [value] if op == "exact" else list(_iterable(value, lookup))
            return self._narrow_values(name, values)
        if name in _TIME_FIELDS:
            return self._narrow_time(name, op, value)
        raise UnsupportedLookup(
            gettext("the ledger admin cannot filter by %(lookup)r") % {"lookup": lookup}
        )

    def _narrow_values(self, name: str, values: list[Any]) -> Spec:
        if name == "queue":
            wanted = {str(value) for value in values}
            return replace(self, queues=tuple(q for q in self.queues if q in wanted))
        if name == "state":
            states = set()
            for value in values:
                try:
                    states.add(State(value.value if isinstance(value, State) else value))
                except ValueError:
                    raise UnsupportedLookup(f"{value!r} is not a record state") from None
            return replace(self, states=tuple(s for s in self.states if s in states))
        idents: set[Ident] = set()
        for value in values:
            if name == "request_id":
                if isinstance(value, str) and value:
                    idents.add((None, value))
            else:
                pair = split_key(value)
                if pair is not None:  # a malformed key names no record
                    idents.add(pair)
        return replace(self, idents=_intersect(self.idents, idents))

    def _narrow_time(self, name: str, op: str, value: Any) -> Spec:
        low, high = self.bounds.get(name, (None, None))
        if op == "range":
            bounds = list(_iterable(value, f"{name}__range"))
            if len(bounds) != 2:
                raise UnsupportedLookup(f"{name}__range takes two bounds")
            new_low, new_high = to_ms(bounds[0]), to_ms(bounds[1])
        elif op in ("gte", "gt"):
            new_low, new_high = to_ms(value) + (op == "gt"), None
        elif op in ("lte", "lt"):
            new_low, new_high = None, to_ms(value) - (op == "lt")
        else:
            raise UnsupportedLookup(f"the ledger admin cannot filter by {name}__{op}")
        if new_low is not None:
            low = new_low if low is None else max(low, new_low)
        if new_high is not None:
            high = new_high if high is None else min(high, new_high)
        return replace(self, bounds={**self.bounds, name: (low, high)})


def _iterable(value: Any, lookup: str) -> Iterable[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise UnsupportedLookup(f"{lookup!r} takes a list")
    return value


def _intersect(current: frozenset[Ident] | None, new: set[Ident]) -> frozenset[Ident]:
    if current is None:
        return frozenset(new)
    out: set[Ident] = set()
    for queue_a, id_a in current:
        for queue_b, id_b in new:
            if id_a == id_b and (queue_a is None or queue_b is None or queue_a == queue_b):
                out.add((queue_a or queue_b, id_a))
    return frozenset(out)
