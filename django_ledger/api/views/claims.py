"""Claim due records under a lease, then renew and settle them by claim token."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiResponse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from ...conf import ledger_settings
from ...core.ledger import MAX_BATCH
from ...core.records import State, owner_problem
from ...core.results import Claim, Settlement, SettlementStatus
from ...core.sharded import AnyLedger
from ..errors import ApiError
from ..representations import settlement_data
from ..schema import QUEUE, errors, extend_schema
from ..serializers import (
    ClaimListSerializer,
    ClaimRequestSerializer,
    RenewBatchSerializer,
    RenewSerializer,
    SettleBatchSerializer,
    SettlementBatchSerializer,
    SettlementSerializer,
    SettleSerializer,
)
from ..tokens import issue_token, read_token
from .base import LedgerViewSet

__all__ = ["ClaimViewSet"]

#: Bodies of claim calls hold an owner or claim tokens: small.
SMALL_BODY = 16 * 1024
BATCH_BODY = 256 * 1024


@extend_schema(tags=["claims"])
class ClaimViewSet(LedgerViewSet):
    action_rules = {
        name: ("claim", "claim")
        for name in ("claim", "renew", "renew_batch", "settle", "settle_batch")
    }

    @extend_schema(
        operation_id="claim",
        summary="Claim up to `limit` due records for an owner",
        request=ClaimRequestSerializer,
        parameters=[QUEUE],
        responses={
            200: ClaimListSerializer,
            204: OpenApiResponse(description="Nothing is due (or the queue's gate is closed)."),
            **errors(400, 404),
        },
    )
    def claim(self, request: Request, queue: str) -> Response:
        """Claim due records for an owner, each with the token that settles it."""
        ledger = self.ledger
        data = self.validated_body(ClaimRequestSerializer, SMALL_BODY)
        problem = owner_problem(data["owner"])
        if problem is not None:
            raise ApiError(
                400,
                problem,
                gettext("The owner is not usable (%(problem)s).") % {"problem": problem},
            )
        lease = data.get("lease", ledger_settings.queue(queue).lease)
        claims = ledger.claim_many(data["owner"], data["limit"], lease)
        if not claims:
            return Response(status=204)
        return Response({"claims": [_claim_data(ledger, claim) for claim in claims]})

    @extend_schema(
        operation_id="renew",
        summary="Extend a claim's lease",
        request=RenewSerializer,
        parameters=[QUEUE],
        responses={200: SettlementSerializer, **errors(400, 404, 409)},
    )
    def renew(self, request: Request, queue: str) -> Response:
        """Extend the lease of the claim a token names (409 claim_lost if it moved on)."""
        ledger = self.ledger
        data = self.validated_body(RenewSerializer, SMALL_BODY)
        claim = read_token(ledger, data["token"])
        settlement = ledger.renew(claim, data.get("lease", ledger_settings.queue(queue).lease))
        return _settlement_response(claim, settlement)

    @extend_schema(
        operation_id="renew_batch",
        summary="Extend many claims' leases",
        description="A lost claim is an item with status LOST and its reason; the call answers 200.",
        request=RenewBatchSerializer,
        parameters=[QUEUE],
        responses={200: SettlementBatchSerializer, **errors(400, 404, 413)},
    )
    def renew_batch(self, request: Request, queue: str) -> Response:
        """Extend the leases of many claims."""
        batch = self._batch(RenewBatchSerializer)
        default = ledger_settings.queue(queue).lease
        results = self.ledger.renew_many(
            (claim, item.get("lease", default)) for claim, item in batch
        )
        return Response({"results": [settlement_data(r) for r in results]})

    @extend_schema(
        operation_id="settle",
        summary="Settle a claim: COMPLETED, FAILED, or back to PENDING",
        request=SettleSerializer,
        parameters=[QUEUE],
        responses={200: SettlementSerializer, **errors(400, 404, 409)},
    )
    def settle(self, request: Request, queue: str) -> Response:
        """Settle the claim a token names (409 claim_lost if it moved on)."""
        ledger = self.ledger
        data = self.validated_body(SettleSerializer, SMALL_BODY)
        claim = read_token(ledger, data["token"])
        settlement = ledger.settle(claim, State(data["state"]), data["delay"])
        return _settlement_response(claim, settlement)

    @extend_schema(
        operation_id="settle_batch",
        summary="Settle many claims in one call",
        description=(
            "Every token is checked first: one not issued by this server refuses the "
            "whole call (400), nothing settled. A lost claim is an item with status LOST "
            "and its reason; the call answers 200."
        ),
        request=SettleBatchSerializer,
        parameters=[QUEUE],
        responses={200: SettlementBatchSerializer, **errors(400, 404, 413)},
    )
    def settle_batch(self, request: Request, queue: str) -> Response:
        """Settle many claims."""
        batch = self._batch(SettleBatchSerializer)
        results = self.ledger.settle_many(
            [(claim, State(item["state"]), item["delay"]) for claim, item in batch]
        )
        return Response({"results": [settlement_data(r) for r in results]})

    def _batch(self, serializer_class: type[Serializer[Any]]) -> list[tuple[Claim, dict[str, Any]]]:
        """Validate a batch's body; return each item with the claim its token names.

        Every token is read before anything is done: one not ours refuses the call.
        """
        ledger = self.ledger
        self.check_body_size(BATCH_BODY)
        data = self.request.data
        sent = data.get("items") if isinstance(data, dict) else None
        if isinstance(sent, list) and len(sent) > MAX_BATCH:
            raise ApiError(
                413,
                "batch_too_large",
                gettext("A batch holds at most %(items)s items; split it.") % {"items": MAX_BATCH},
                {"max_items": MAX_BATCH, "items": len(sent)},
            )
        items = self.validated(serializer_class, data)["items"]
        batch = []
        for index, item in enumerate(items):
            try:
                batch.append((read_token(ledger, item["token"]), item))
            except ApiError as exc:
                exc.details = {"index": index}
                raise
        return batch


def _claim_data(ledger: AnyLedger, claim: Claim) -> dict[str, Any]:
    return {
        "token": issue_token(ledger, claim),
        "request_id": claim.request_id,
        "payload": claim.payload,
        "owner": claim.owner,
        "attempt": claim.attempt,
        "fence": claim.fence,
        "lease_until": claim.lease_until,
        "traceparent": claim.traceparent,
    }


def _settlement_response(claim: Claim, settlement: Settlement) -> Response:
    if settlement.status is SettlementStatus.LOST:
        reason = settlement.reason or "lost"
        raise ApiError(
            409,
            "claim_lost",
            gettext("The claim of %(request_id)r is lost (%(reason)s); nothing changed.")
            % {"request_id": claim.request_id, "reason": reason},
            {"request_id": claim.request_id, "reason": reason},
        )
    return Response(settlement_data(settlement))
