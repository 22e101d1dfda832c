"""Opaque cursors over Redis indexes (DRF's CursorPagination needs the ORM).

A cursor is signed (Django's ``signing``) and bound to the listing it came from (the
queue, and the state and order of a record listing): one altered, or used on another
listing, is refused with ``cursor_invalid``. Record listings page through a sorted
set (ready, leases, or a terminal index) by rank, so a deep page costs what the first
does; the quarantine listing follows an ``HSCAN`` cursor.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, ClassVar

from django.core import signing
from django.utils.translation import gettext
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response

from .conf import api_settings
from .errors import ApiError, invalid

__all__ = ["QuarantinePagination", "RecordPagination"]

SALT = "django_ledger.api.cursor"
#: One index entry: (member, score) as redis-py answers ``withscores=True``.
Row = tuple[bytes, float]


class OpaqueCursorPagination(BasePagination):
    """A page of ``limit`` items and the opaque cursor of the next page."""

    kind: ClassVar[str] = ""
    cursor_query_param = "cursor"
    limit_query_param = "limit"
    #: The cursor of the page after the one read; ``None`` on the last page.
    next_cursor: str | None = None

    def get_limit(self, request: Request) -> int:
        raw = request.query_params.get(self.limit_query_param)
        if raw is None:
            return min(api_settings.page_size, api_settings.max_page_size)
        if not raw.isdecimal() or int(raw) < 1:
            raise invalid({self.limit_query_param: [gettext("A positive integer is required.")]})
        return min(int(raw), api_settings.max_page_size)

    def read_cursor(self, request: Request, bind: dict[str, Any]) -> Any:
        """Return the position the request's cursor holds, or ``None`` on a first page."""
        token = request.query_params.get(self.cursor_query_param)
        if token is None:
            return None
        try:
            data = signing.loads(token, salt=SALT)
        except signing.BadSignature:
            data = None
        if not isinstance(data, dict) or data.get("k") != self.kind or data.get("b") != bind:
            raise ApiError(
                400,
                "cursor_invalid",
                gettext("The cursor was not issued for this listing, or was altered."),
            )
        return data.get("p")

    def make_cursor(self, bind: dict[str, Any], position: Any) -> str:
        return signing.dumps({"k": self.kind, "b": bind, "p": position}, salt=SALT)

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"next": self.next_cursor, "results": data})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["next", "results"],
            "properties": {
                "next": {
                    "type": "string",
                    "nullable": True,
                    "description": "The cursor of the next page; null on the last page.",
                },
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": "The opaque cursor of the page to read (the `next` of the previous page).",
                "schema": {"type": "string"},
            },
            {
                "name": self.limit_query_param,
                "required": False,
                "in": "query",
                "description": "Items per page (default 20, at most 100, as LEDGER['API'] configures).",
                "schema": {"type": "integer", "minimum": 1},
            },
        ]


class RecordPagination(OpaqueCursorPagination):
    """Page through a sorted-set index by rank, oldest (lowest score) or newest first."""

    kind = "records"

    def paginate_index(
        self,
        request: Request,
        indexes: Sequence[tuple[Any, str]],
        *,
        descending: bool,
        bind: dict[str, Any],
    ) -> list[tuple[bytes, int]]:
        """Return the requested page's members, each with its index's position; set ``next_cursor``.

        ``indexes`` are (client, key) pairs, one per shard, merged in the order one sorted
        set orders its entries. The cursor is the last entry shown (its score and member):
        each index reads the ``limit + 1`` entries after it, and the page is the first
        ``limit`` of them all.
        """
        limit = self.get_limit(request)
        after = _position(self.read_cursor(request, bind))
        candidates: list[tuple[Row, int]] = []
        more = False
        for position, (redis, key) in enumerate(indexes):
            start = 0 if after is None else _start_after(redis, key, after, descending)
            rows: list[Row] = redis.zrange(
                key, start, start + limit, desc=descending, withscores=True
            )
            more = more or len(rows) > limit
            # The index may change between the calls above: never hand back what the
            # previous page already covered.
            candidates += [
                (row, position)
                for row in rows[:limit]
                if after is None or _beyond(row, after, descending)
            ]
        candidates.sort(key=lambda item: (item[0][1], item[0][0]), reverse=descending)
        page = candidates[:limit]
        self.next_cursor = None
        if more or len(candidates) > limit:
            last = page[-1][0] if page else after
            if last is not None:
                self.next_cursor = self.make_cursor(bind, _encode_position(last))
        return [(member, position) for (member, _), position in page]


class QuarantinePagination(OpaqueCursorPagination):
    """Follow ``HSCAN`` cursors over the quarantine hashes (pages hold about ``limit``).

    One hash's cursor is its ``HSCAN`` cursor. A sharded queue's holds ``[shard, HSCAN
    cursor]`` over the shards' hashes one after another: a page reads one shard (the
    next ones too while it finds nothing), so a page never holds more than ``HSCAN``
    answered.
    """

    kind = "quarantine"

    def paginate_hashes(
        self, request: Request, hashes: Sequence[tuple[Any, str]], *, bind: dict[str, Any]
    ) -> list[tuple[bytes, bytes]]:
        limit = self.get_limit(request)
        position = self.read_cursor(request, bind)
        sharded = len(hashes) > 1
        if position is None:
            position = [0, 0] if sharded else 0
        parts = position if sharded else [0, position]
        if (
            not isinstance(parts, list)
            or len(parts) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in parts)
            or parts[0] >= len(hashes)
        ):
            raise _cursor_not_issued()
        index, cursor = parts
        while True:
            redis, key = hashes[index]
            cursor, items = redis.hscan(key, cursor, count=limit)
            cursor = int(cursor)
            if cursor == 0:
                index, cursor = index + 1, 0
            if items or index >= len(hashes) or not sharded:
                break
        next_position = [index, cursor] if sharded else cursor
        done = index >= len(hashes)
        self.next_cursor = None if done else self.make_cursor(bind, next_position)
        return list(items.items())


def _cursor_not_issued() -> ApiError:
    return ApiError(400, "cursor_invalid", gettext("The cursor is not one this server issued."))


def _encode_position(row: Row) -> list[Any]:
    member, score = row
    return [score, base64.b64encode(member).decode("ascii")]


def _position(value: Any) -> Row | None:
    if value is None:
        return None
    try:
        score, member = value
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise TypeError(score)
        return base64.b64decode(member, validate=True), float(score)
    except (TypeError, ValueError, binascii.Error):
        raise _cursor_not_issued() from None


def _beyond(row: Row, after: Row, descending: bool) -> bool:
    """Whether ``row`` comes after ``after`` in the listing's order."""
    here, there = (row[1], row[0]), (after[1], after[0])
    return here < there if descending else here > there


def _bound(score: float, exclusive: bool = False) -> str:
    return ("(" if exclusive else "") + f"{score:.17g}"


def _start_after(redis: Any, key: str, after: Row, descending: bool) -> int:
    """Return the rank (in the listing's order) of the first entry after ``after``."""
    member, score = after
    pipe = redis.pipeline(transaction=False)
    pipe.zscore(key, member)
    if descending:
        pipe.zrevrank(key, member)
        pipe.zcount(key, _bound(score, exclusive=True), "+inf")
        pipe.zcount(key, _bound(score), "+inf")
    else:
        pipe.zrank(key, member)
        pipe.zcount(key, "-inf", _bound(score, exclusive=True))
        pipe.zcount(key, "-inf", _bound(score))
    current, rank, low, high = pipe.execute()
    if current is not None and current == score and rank is not None:
        return int(rank) + 1
    # The entry left the index: binary search its place among the entries that share
    # its score (ranks low..high-1), which the index keeps in member order.
    low, high = int(low), int(high)
    while low < high:
        middle = (low + high) // 2
        rows = redis.zrange(key, middle, middle, desc=descending, withscores=True)
        if not rows or _beyond(rows[0], after, descending):
            high = middle
        else:
            low = middle + 1
    return low
