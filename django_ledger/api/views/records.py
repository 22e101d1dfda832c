"""Read records: one by id, many by ``?ids=``, or a queue's records by state."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response

from ...core.errors import CorruptRecord
from ...core.ledger import MAX_BATCH, Ledger
from ...core.records import Record, State, decode_record, id_problem
from ...core.sharded import AnyLedger
from ...services.transfer import read_raw
from ..errors import ApiError, check_request_id, record_not_found
from ..pagination import (
    RecordPagination,
    Row,
    _beyond,
    _encode_position,
    _position,
    _start_after,
)
from ..representations import record_data
from ..schema import QUEUE, REQUEST_ID, RETRY_AFTER, errors, extend_schema
from ..serializers import (
    STATES,
    RecordListQuerySerializer,
    RecordSerializer,
    ResolutionListSerializer,
    ResolveQuerySerializer,
)
from .base import LedgerViewSet

__all__ = ["RecordViewSet"]


@extend_schema(tags=["records"])
class RecordViewSet(LedgerViewSet):
    action_rules = {name: ("view", "read") for name in ("list", "retrieve", "resolve")}
    pagination_class = RecordPagination

    @extend_schema(
        operation_id="records_list",
        summary="List a queue's records in one state, oldest or newest first",
        description=(
            "Pages follow the state's index (PENDING by due time, CLAIMED by lease "
            "expiry, terminal states by when they ended), by rank. An index entry whose "
            "record is gone or corrupt is skipped (repair mends both)."
        ),
        parameters=[
            QUEUE,
            OpenApiParameter("state", OpenApiTypes.STR, enum=STATES, default="PENDING"),
            OpenApiParameter(
                "order", OpenApiTypes.STR, enum=["oldest", "newest"], default="oldest"
            ),
            RETRY_AFTER,
        ],
        responses={200: RecordSerializer(many=True), **errors(400, 404)},
    )
    def list(self, request: Request, queue: str) -> Response:
        """List records of one state, oldest or newest first, by opaque cursor."""
        ledger = self.ledger
        query = self.validated(RecordListQuerySerializer, request.query_params)
        state = State(query["state"])
        paginator = RecordPagination()
        bind = {"q": queue, "s": state.value, "o": query["order"]}
        descending = query["order"] == "newest"
        if len(ledger.shards) > 1:
            members, raws = _sharded_page(request, ledger, paginator, state, descending, bind)
        else:
            single = ledger.shards[0]
            with single.translate_errors():
                members = paginator.paginate_index(
                    request,
                    single.redis,
                    _index_key(single, state),
                    descending=descending,
                    bind=bind,
                )
                raws = single.redis.hmget(single.records_key, members) if members else []
        records: list[Record] = []
        for member, raw in zip(members, raws, strict=True):
            if raw is None:
                continue  # the record is gone: repair drops the entry
            try:
                records.append(decode_record(member.decode("utf-8"), raw))
            except (UnicodeDecodeError, CorruptRecord):
                continue  # corrupt: repair quarantines it
        return paginator.get_paginated_response([record_data(r) for r in records])

    @extend_schema(
        operation_id="record",
        summary="Resolve one record by id",
        parameters=[QUEUE, REQUEST_ID, RETRY_AFTER],
        responses={200: RecordSerializer, **errors(400, 404, 409)},
    )
    def retrieve(self, request: Request, queue: str, request_id: str) -> Response:
        """Resolve one record, verified by its checksum."""
        check_request_id(request_id)
        record = self.ledger.resolve(request_id)  # corrupt: 409 record_corrupt
        if record is None:
            raise record_not_found(request_id)
        return Response(record_data(record))

    @extend_schema(
        operation_id="resolve",
        summary=f"Resolve up to {MAX_BATCH} records by id (`?ids=a&ids=b`)",
        parameters=[
            QUEUE,
            OpenApiParameter(
                "ids",
                {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "maxItems": MAX_BATCH,
                },
                required=True,
                explode=True,
                style="form",
                description="Request ids, the parameter repeated once per id.",
            ),
            RETRY_AFTER,
        ],
        responses={200: ResolutionListSerializer, **errors(400, 404)},
    )
    def resolve(self, request: Request, queue: str) -> Response:
        """Resolve many records; each id answers FOUND, MISSING or CORRUPT."""
        ledger = self.ledger
        ids: list[str] = self.validated(ResolveQuerySerializer, request.query_params)["ids"]
        for index, request_id in enumerate(ids):
            problem = id_problem(request_id)
            if problem is not None:
                raise ApiError(
                    400,
                    problem,
                    gettext("Request id %(index)s is not usable (%(problem)s).")
                    % {"index": index, "problem": problem},
                    {"index": index},
                )
        raws = read_raw(ledger, [(ledger.shard_for(request_id), request_id) for request_id in ids])
        results = []
        for request_id, raw in zip(ids, raws, strict=True):
            result: dict[str, Any] = {
                "request_id": request_id,
                "status": "MISSING",
                "record": None,
                "reason": None,
            }
            if raw is not None:
                try:
                    result["record"] = record_data(decode_record(request_id, raw))
                    result["status"] = "FOUND"
                except CorruptRecord as exc:
                    result["status"], result["reason"] = "CORRUPT", exc.reason
            results.append(result)
        return Response({"results": results})


def _index_key(shard: Ledger, state: State) -> str:
    """The key of ``state``'s index in one shard."""
    indexes = {State.PENDING: shard.ready_key, State.CLAIMED: shard.leases_key}
    indexes.update(shard.terminal_keys)
    return indexes[state]


def _sharded_page(
    request: Request,
    ledger: AnyLedger,
    paginator: RecordPagination,
    state: State,
    descending: bool,
    bind: dict[str, Any],
) -> tuple[list[bytes], list[bytes | None]]:
    """One page of a sharded queue's index of ``state``: the shards' merged in index order.

    The cursor is the same as on one shard (the last entry shown, its score and id):
    each shard reads the ``limit + 1`` entries after it, and the page is the first
    ``limit`` of them all, ordered as one sorted set orders its entries.
    """
    limit = paginator.get_limit(request)
    after = _position(paginator.read_cursor(request, bind))
    candidates: list[tuple[Row, Ledger]] = []
    more = False
    with ledger.translate_errors():
        for shard in ledger.shards:
            key = _index_key(shard, state)
            start = 0 if after is None else _start_after(shard.redis, key, after, descending)
            rows: list[Row] = shard.redis.zrange(
                key, start, start + limit, desc=descending, withscores=True
            )
            more = more or len(rows) > limit
            candidates += [
                (row, shard)
                for row in rows[:limit]
                if after is None or _beyond(row, after, descending)
            ]
    candidates.sort(key=lambda item: (item[0][1], item[0][0]), reverse=descending)
    page = candidates[:limit]
    paginator.next_cursor = None
    if more or len(candidates) > limit:
        last = page[-1][0] if page else after
        if last is not None:
            paginator.next_cursor = paginator.make_cursor(bind, _encode_position(last))
    members = [member for (member, _), _ in page]
    return members, read_raw(ledger, [(shard, member) for (member, _), shard in page])
