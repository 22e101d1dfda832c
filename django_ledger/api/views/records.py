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
from ...core.records import Record, State, decode_record
from ...services.transfer import read_raw
from ..errors import check_request_id, record_not_found
from ..pagination import RecordPagination
from ..representations import record_data
from ..schema import QUEUE, REQUEST_ID, errors, extend_schema
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
        ],
        responses={200: RecordSerializer(many=True), **errors(400, 404)},
    )
    def list(self, request: Request, queue: str) -> Response:
        """List records of one state, oldest or newest first, by opaque cursor."""
        ledger = self.ledger
        query = self.validated(RecordListQuerySerializer, request.query_params)
        state = State(query["state"])
        paginator = RecordPagination()
        shards = ledger.shards
        with ledger.translate_errors():
            page = paginator.paginate_index(
                request,
                [(shard.redis, _index_key(shard, state)) for shard in shards],
                descending=query["order"] == "newest",
                bind={"q": queue, "s": state.value, "o": query["order"]},
            )
        raws = read_raw(ledger, [(shards[position], member) for member, position in page])
        records: list[Record] = []
        for (member, _), raw in zip(page, raws, strict=True):
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
        parameters=[QUEUE, REQUEST_ID],
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
        ],
        responses={200: ResolutionListSerializer, **errors(400, 404)},
    )
    def resolve(self, request: Request, queue: str) -> Response:
        """Resolve many records; each id answers FOUND, MISSING or CORRUPT."""
        ledger = self.ledger
        ids: list[str] = self.validated(ResolveQuerySerializer, request.query_params)["ids"]
        for index, request_id in enumerate(ids):
            message = gettext("Request id %(index)s is not usable (%(problem)s).")
            check_request_id(request_id, message, {"index": index})
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
