"""Cancel one record, queued or running: ``POST /api/queues/{q}/records/{id}/cancel/``.

Needs the ``operate`` permission on the queue. The cancel goes the one Django path
(``tasks/cancelling.py``'s ``cancel_record``): the record's fenced effects first, then the
record, so no effect of a cancelled run commits after the answer.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from ...core.cancelling import MAX_REASON_BYTES
from ...services.cancelling import cancel_record, effects_database
from ..errors import ApiError, check_request_id, invalid, record_not_found
from ..schema import QUEUE, REQUEST_ID, errors, extend_schema
from .base import LedgerViewSet

__all__ = ["CancelViewSet"]


class CancelRequestSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=MAX_REASON_BYTES // 4,
        help_text="Why: kept with the record's error (up to 500 bytes of UTF-8).",
    )
    version = serializers.CharField(
        required=False,
        max_length=64,
        help_text="The record's version you were shown: cancel only if it is still that one.",
    )


class CancelAnswerSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=["cancelled"])
    was = serializers.ChoiceField(choices=["PENDING", "CLAIMED"])
    fence = serializers.IntegerField(help_text="The cancellation's fence.")
    effects_committed = serializers.BooleanField(
        allow_null=True,
        help_text="Whether the task's fenced effects had committed before the cancel "
        "(null: the database has no effects table).",
    )


class CancelViewSet(LedgerViewSet):
    action_rules = {"cancel": ("operate", "operate")}

    @extend_schema(
        operation_id="record_cancel",
        summary="Cancel a record, queued or running",
        description=(
            "A PENDING record ends FAILED and never runs; a CLAIMED one ends FAILED under a "
            "new fence, so its run's renewals and settlement answer LOST and its fenced "
            "effects are refused. 409 `record_ended` for a record that has ended (nothing "
            "changes), `record_changed` when it is no longer the `version` given, "
            "`record_corrupt`; 404 `record_not_found`."
        ),
        request=CancelRequestSerializer,
        parameters=[QUEUE, REQUEST_ID],
        responses={200: CancelAnswerSerializer, **errors(400, 404, 409)},
    )
    def cancel(self, request: Request, queue: str, request_id: str) -> Response:
        """Cancel one record and say what it was."""
        self.check_body_size(4096)
        check_request_id(request_id)
        data = self.validated(CancelRequestSerializer, request.data)
        if len(data["reason"].encode("utf-8", "surrogatepass")) > MAX_REASON_BYTES:
            raise invalid({"reason": [gettext("At most 500 bytes (UTF-8).")]})
        user = request.user
        by = str(user.get_username()) if hasattr(user, "get_username") else str(user)
        outcome = cancel_record(
            queue,
            request_id,
            by=by,
            reason=data["reason"],
            database=effects_database(),
            version=data.get("version"),
        )
        if outcome.status == "missing":
            raise record_not_found(request_id)
        if outcome.status != "cancelled":
            code, message = {
                "ended": ("record_ended", gettext("The record has ended; nothing was changed.")),
                "changed": (
                    "record_changed",
                    gettext("The record changed since it was shown; nothing was done."),
                ),
                "corrupt": (
                    "record_corrupt",
                    gettext("The record's bytes are corrupt or quarantined; nothing was done."),
                ),
            }[outcome.status]
            details: dict[str, Any] = {"request_id": request_id}
            if outcome.was is not None:
                details["state"] = outcome.was
            raise ApiError(409, code, message, details)
        return Response(CancelAnswerSerializer(outcome).data)
