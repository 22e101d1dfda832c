"""Lazy queries over Redis that the stock admin ``ChangeList`` can drive.

A query is a ``Spec`` until ``count()`` or a slice: ``filter``, ``order_by``,
``distinct`` and friends only build a new spec. A slice reads exactly the rows shown
(each kind of query says how: ``record_query``, ``quarantine``), so page 5,000 costs
what page 1 does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Self, TypeVar

from django.core.exceptions import MultipleObjectsReturned
from django.db.models import Q

from ..conf import get_ledger
from ..core.ledger import Ledger
from ..core.scripts import script
from ..core.sharded import AnyLedger
from ..models import LedgerEntry
from .lookups import SCORE_FIELD, Spec, UnsupportedLookup

__all__ = ["MAX_MATERIALIZE", "LedgerQuery", "run_script", "spans"]

#: Most rows a query hands out whole (iteration, ``list()``): pages are far smaller.
MAX_MATERIALIZE = 10_000
_ORDER_FIELDS = frozenset({"score", *SCORE_FIELD.values()})
_Part = TypeVar("_Part")


def run_script(ledger: Ledger, name: str, args: Sequence[Any]) -> Any:
    """Run one of the admin's scripts (``core/lua/scripts/<name>.lua``) on one shard.

    ``ledger`` is a one-shard ledger: a plain queue's, or one of ``ledger.shards``.
    """
    return ledger.run(script(name), args)


def spans(
    sizes: Iterable[tuple[_Part, int]], offset: int, want: int
) -> Iterator[tuple[_Part, int, int]]:
    """Walk rows ``[offset, offset + want)`` of parts of ``size`` rows each, one after another.

    Yields each part the rows reach, the offset of the first of them in it, and how many
    rows are still wanted (from this part on).
    """
    for part, size in sizes:
        if want <= 0:
            break
        if offset >= size:
            offset -= size
            continue
        yield part, offset, want
        want -= min(want, size - offset)
        offset = 0


class _QueryInfo:
    """The parts of ``QuerySet.query`` that ``ChangeList`` reads."""

    select_related = False

    def __init__(self, order_by: tuple[str, ...]) -> None:
        self.order_by = order_by


class LedgerQuery:
    """The QuerySet subset the admin needs, over one or more queues in Redis."""

    ordered = True
    totally_ordered = True

    def __init__(self, model: type[LedgerEntry], spec: Spec, order_by: Sequence[Any] = ()) -> None:
        self.model = model
        self.spec = spec
        self.query = _QueryInfo(tuple(order_by))
        self._total: int | None = None
        self._cached_rows: list[LedgerEntry] | None = None
        self._ledgers: dict[str, AnyLedger] = {}
        #: A note for some rows by key, set as their ``error`` (``noting``).
        self._notes: dict[str, str] = {}
        self._cached_counts: dict[str, int] | None = None
        #: Each queue's counts per shard, as ``counts`` read them.
        self._cached_shard_counts: dict[str, list[Any]] = {}
        self._cached_found: list[LedgerEntry] | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"

    # -- building -------------------------------------------------------------------

    def _with(self, spec: Spec | None = None, order_by: Sequence[Any] | None = None) -> Self:
        clone = type(self)(
            self.model,
            self.spec if spec is None else spec,
            self.query.order_by if order_by is None else order_by,
        )
        clone._ledgers = self._ledgers
        clone._notes = self._notes
        return clone

    def _clone(self) -> Self:
        # The same spec selects the same rows: the clone keeps what was read (the
        # ChangeList clones its query to list a page that holds every result).
        clone = self._with()
        clone.__dict__.update({k: v for k, v in self.__dict__.items() if k.startswith("_cached")})
        clone._total = self._total
        return clone

    def all(self) -> Self:
        return self._with()

    def none(self) -> Self:
        return self._with(spec=Spec(queues=(), empty=True))

    def using(self, alias: str | None) -> Self:
        return self

    def distinct(self, *fields: str) -> Self:
        # Every record is listed once: nothing here can duplicate a row.
        return self._with()

    def select_related(self, *fields: str) -> Self:
        return self._with()

    def filter(self, *args: Q, **kwargs: Any) -> Self:
        spec = self.spec
        for q in args:
            if not isinstance(q, Q):
                raise UnsupportedLookup(f"unsupported filter {q!r}")
            spec = spec.narrow_q(q)
        for lookup, value in kwargs.items():
            spec = spec.narrow(lookup, value)
        self.check_spec(spec)
        return self._with(spec=spec)

    def exclude(self, *args: Any, **kwargs: Any) -> Self:
        raise UnsupportedLookup("the ledger admin cannot exclude records")

    def order_by(self, *fields: Any) -> Self:
        descending = False
        for name in fields:
            # The indexes sort by score alone; other fields (the pk tie-break the
            # ChangeList appends) cannot change the order and are ignored.
            if isinstance(name, str) and name.lstrip("-") in _ORDER_FIELDS:
                descending = name.startswith("-")
                break
        return self._with(spec=replace(self.spec, descending=descending), order_by=fields)

    def noting(self, notes: dict[str, str]) -> Self:
        """Return this query, with ``notes`` (by key) set as the listed rows' ``error``."""
        clone = self._with()
        clone._notes = {**self._notes, **notes}
        return clone

    def check_spec(self, spec: Spec) -> None:
        """Refuse lookups this kind of query cannot answer."""

    # -- reading --------------------------------------------------------------------

    def ledger(self, queue: str) -> AnyLedger:
        if queue not in self._ledgers:
            self._ledgers[queue] = get_ledger(queue)
        return self._ledgers[queue]

    def count(self) -> int:
        if self._total is None:
            self._total = self.total()
        return self._total

    def exists(self) -> bool:
        return self.count() > 0

    def __len__(self) -> int:
        return self.count()

    def __bool__(self) -> bool:
        return self.exists()

    def __iter__(self) -> Iterator[LedgerEntry]:
        if self._cached_rows is None:
            total = self.count()
            if total > MAX_MATERIALIZE:
                raise UnsupportedLookup(
                    f"{total} records match: narrow the filter to at most {MAX_MATERIALIZE}"
                )
            self._cached_rows = self._noted(self.rows(0, total))
        return iter(self._cached_rows)

    def __getitem__(self, k: int | slice) -> Any:
        if isinstance(k, int):
            if k < 0:
                raise ValueError("negative indexing is not supported")
            rows = self._noted(self.rows(k, k + 1))
            if not rows:
                raise IndexError("record query index out of range")
            return rows[0]
        if not isinstance(k, slice) or k.step not in (None, 1):
            raise TypeError("record queries take an index or a slice without a step")
        start = k.start or 0
        stop = self.count() if k.stop is None else k.stop
        if start < 0 or stop < 0:
            raise ValueError("negative indexing is not supported")
        if stop <= start:
            return []
        return self._noted(self.rows(start, stop))

    def _noted(self, rows: list[LedgerEntry]) -> list[LedgerEntry]:
        for row in rows:
            if row.key in self._notes:
                row.error = self._notes[row.key]
        return rows

    def get(self, *args: Q, **kwargs: Any) -> LedgerEntry:
        rows = self.filter(*args, **kwargs)[:2]
        if not rows:
            raise self.model.DoesNotExist(
                f"{self.model._meta.object_name} matching query does not exist."
            )
        if len(rows) > 1:
            raise MultipleObjectsReturned(f"more than one {self.model._meta.object_name} matched")
        row: LedgerEntry = rows[0]
        return row

    def total(self) -> int:
        if self.spec.idents is not None:
            return len(self.found())
        return sum(self.counts().values())

    def rows(self, start: int, stop: int) -> list[LedgerEntry]:
        if self.spec.idents is not None:
            return self.found()[start:stop]
        return self.page(start, stop)

    def wanted(self) -> dict[str, list[str]]:
        """The ids asked for (``spec.idents``) by queue of the spec, each queue's sorted."""
        out = {}
        for queue in () if self.spec.empty else self.spec.queues:
            ids = sorted({i for q, i in self.spec.idents or () if q in (None, queue)})
            if ids:
                out[queue] = ids
        return out

    def by_shard(self, queue: str, ids: list[str]) -> Iterator[tuple[Ledger, list[str]]]:
        """Each shard of ``queue`` that holds some of ``ids``, with those ids."""
        ledger = self.ledger(queue)
        held: dict[int, list[str]] = {}
        for request_id in ids:
            held.setdefault(id(ledger.shard_for(request_id)), []).append(request_id)
        for shard in ledger.shards:
            if id(shard) in held:
                yield shard, held[id(shard)]

    # -- what each kind of query implements -------------------------------------------

    def counts(self) -> dict[str, int]:
        """How many rows each queue of the spec has (cached, with ``_cached_shard_counts``)."""
        raise NotImplementedError

    def found(self) -> list[LedgerEntry]:
        """The rows asked for by id (``spec.idents``), in list order (cached)."""
        raise NotImplementedError

    def page(self, start: int, stop: int) -> list[LedgerEntry]:
        """Rows ``[start, stop)`` of the spec's queues, not narrowed to ids."""
        raise NotImplementedError
