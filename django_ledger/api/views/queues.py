"""Queues: which ones you may use, their stats, quarantine, repair and gate."""

from __future__ import annotations

import base64

from rest_framework.request import Request
from rest_framework.response import Response

from ...conf import ledger_settings
from ...core.errors import CorruptRecord
from ...core.records import decode_record
from ...permissions import can, can_reach_queue
from ..errors import invalid
from ..pagination import QuarantinePagination
from ..schema import QUEUE, errors, extend_schema
from ..serializers import (
    GateSerializer,
    GateStateSerializer,
    QuarantinedSerializer,
    QueueListSerializer,
    RepairReportSerializer,
    RepairSerializer,
    StatsSerializer,
)
from .base import LedgerViewSet

__all__ = ["QuarantineViewSet", "QueueViewSet"]

#: The ledger actions a client may learn it holds on a queue.
API_ACTIONS = ("admit", "claim", "view", "view_queue", "view_quarantine", "operate", "limit")
#: Bytes of a quarantined value shown in its preview.
PREVIEW_BYTES = 256


@extend_schema(tags=["queues"])
class QueueViewSet(LedgerViewSet):
    action_rules = {
        "queues": (None, "read"),
        "stats": ("view_queue", "read"),
        "repair": ("operate", "operate"),
        "gate": ("operate", "operate"),
    }

    @extend_schema(
        operation_id="queues",
        summary="The queues you may reach, with what you may do on each",
        responses={200: QueueListSerializer, **errors()},
    )
    def queues(self, request: Request) -> Response:
        """List the queues the caller may reach, with the actions it holds on each."""
        user = request.user
        listed = []
        for name in ledger_settings.queue_names:
            if not can_reach_queue(user, name):
                continue
            actions = [action for action in API_ACTIONS if can(user, action, name)]
            if actions:
                listed.append({"name": name, "actions": actions})
        return Response({"queues": listed})

    @extend_schema(
        operation_id="stats",
        summary="A queue's counters, read from its indexes",
        parameters=[QUEUE],
        responses={200: StatsSerializer, **errors(404)},
    )
    def stats(self, request: Request, queue: str) -> Response:
        """Return the queue's counters from one consistent snapshot of its indexes."""
        stats = self.ledger.stats()
        data = {**stats.as_dict(), "queue": queue, "now": stats.now, "demand": stats.demand}
        return Response(StatsSerializer(data).data)

    @extend_schema(
        operation_id="repair",
        summary="Repair one page of a queue's records",
        description=(
            'Start with cursor "0" and send back the cursor each answer gives until it '
            'answers done (its cursor "0" again): that is one full repair cycle.'
        ),
        request=RepairSerializer,
        parameters=[QUEUE],
        responses={200: RepairReportSerializer, **errors(400, 404)},
    )
    def repair(self, request: Request, queue: str) -> Response:
        """Repair one HSCAN page of records and say what it did."""
        data = self.validated_body(RepairSerializer, 1024)
        try:
            report = self.ledger.repair_page(data["cursor"], data["count"])
        except ValueError as exc:  # a shard this queue does not have
            raise invalid({"cursor": [str(exc)]}) from exc
        body = {"cursor": report.cursor, "done": report.cursor == "0", "counts": report.counts()}
        return Response(RepairReportSerializer(body).data)

    @extend_schema(
        operation_id="gate",
        summary="Close or open a queue's gate (no claim succeeds while it is closed)",
        request=GateSerializer,
        parameters=[QUEUE],
        responses={200: GateStateSerializer, **errors(400, 404)},
    )
    def gate(self, request: Request, queue: str) -> Response:
        """Close or open the queue's gate."""
        closed = self.validated_body(GateSerializer, 1024)["closed"]
        ledger = self.ledger
        if closed:
            ledger.close_gate()
        else:
            ledger.open_gate()
        return Response({"gate_closed": ledger.gate_closed})


@extend_schema(tags=["queues"])
class QuarantineViewSet(LedgerViewSet):
    action_rules = {"list": ("view_quarantine", "read")}
    pagination_class = QuarantinePagination

    @extend_schema(
        operation_id="quarantine_list",
        summary="A queue's quarantined ids, with their bytes shown safely",
        parameters=[QUEUE],
        responses={200: QuarantinedSerializer(many=True), **errors(400, 404)},
    )
    def list(self, request: Request, queue: str) -> Response:
        """List quarantined ids with their bytes (base64) and why they fail to decode."""
        ledger = self.ledger
        paginator = QuarantinePagination()
        with ledger.translate_errors():
            items = paginator.paginate_hashes(
                request,
                [(shard.redis, shard.quarantine_key) for shard in ledger.shards],
                bind={"q": queue},
            )
        entries = []
        for member, raw in items:
            request_id = member.decode("utf-8", "backslashreplace")
            try:
                decode_record(request_id, raw)
                error = None
            except CorruptRecord as exc:
                error = exc.reason
            entries.append(
                {
                    "request_id": request_id,
                    "size": len(raw),
                    "raw_base64": base64.b64encode(raw).decode("ascii"),
                    "preview": raw[:PREVIEW_BYTES].decode("utf-8", "backslashreplace"),
                    "error": error,
                }
            )
        return paginator.get_paginated_response(QuarantinedSerializer(entries, many=True).data)
