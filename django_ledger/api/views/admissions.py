"""Admit requests, one (``Idempotency-Key`` welcome) or a batch."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext, gettext_lazy
from drf_spectacular.utils import OpenApiResponse
from rest_framework.request import Request
from rest_framework.response import Response

from ...core.jobs import MAX_PAYLOAD_DEPTH, too_deep
from ...core.ledger import MAX_BATCH, MAX_BATCH_BYTES
from ...core.records import MAX_ID_BYTES
from ...core.results import Admission, AdmissionStatus
from ..conf import api_settings
from ..errors import ApiError, invalid
from ..representations import admission_data
from ..schema import IDEMPOTENCY_KEY, QUEUE, errors, extend_schema
from ..serializers import (
    AdmissionBatchSerializer,
    AdmissionSerializer,
    AdmitBatchSerializer,
    AdmitSerializer,
)
from .base import LedgerViewSet

__all__ = ["AdmissionViewSet", "carries_tasks"]


@extend_schema(tags=["admission"])
class AdmissionViewSet(LedgerViewSet):
    action_rules = {"admit": ("admit", "admit"), "admit_batch": ("admit", "admit")}

    @extend_schema(
        operation_id="admit",
        summary="Admit one request, once by its id",
        request=AdmitSerializer,
        parameters=[QUEUE, IDEMPOTENCY_KEY],
        responses={
            201: OpenApiResponse(AdmissionSerializer, description="Admitted."),
            200: OpenApiResponse(
                AdmissionSerializer, description="A duplicate: the stored record, unchanged."
            ),
            **errors(400, 404, 409, 413),
        },
    )
    def admit(self, request: Request, queue: str) -> Response:
        """Admit one request: 201 new, 200 duplicate, or a refusal with its code."""
        ledger = self.ledger
        data = self.validated_body(AdmitSerializer, ledger.max_payload_bytes)
        request_id = _request_id(data.get("request_id"), request.headers.get("Idempotency-Key"))
        if carries_tasks(queue) and too_deep(data["payload"]):
            admission = Admission(request_id, AdmissionStatus.REJECTED, "payload_too_deep")
        else:
            admission = ledger.admit(
                request_id, data["payload"], data["delay"], data["traceparent"], data["priority"]
            )
        return admission_response(admission, ledger.max_payload_bytes)

    @extend_schema(
        operation_id="admit_batch",
        summary=f"Admit up to {MAX_BATCH} requests",
        description=(
            f"At most {MAX_BATCH} items and {MAX_BATCH_BYTES} bytes of ids and payloads "
            "(413 `batch_too_large` beyond, nothing admitted). Each item gets its own "
            "answer, in order; the call as a whole answers 200."
        ),
        request=AdmitBatchSerializer,
        parameters=[QUEUE],
        responses={200: AdmissionBatchSerializer, **errors(400, 404, 413)},
    )
    def admit_batch(self, request: Request, queue: str) -> Response:
        """Admit a batch; every item answers for itself."""
        ledger = self.ledger
        self.check_body_size(MAX_BATCH_BYTES)
        items = request.data.get("items") if isinstance(request.data, dict) else None
        if isinstance(items, list) and len(items) > MAX_BATCH:
            raise _batch_too_large({"max_items": MAX_BATCH, "items": len(items)})
        data = self.validated(AdmitBatchSerializer, request.data)
        valid: list[dict[str, Any]] = data["items"]
        size = sum(len(i["request_id"].encode()) + len(i["payload"].encode()) for i in valid)
        if size > MAX_BATCH_BYTES:
            raise _batch_too_large({"max_bytes": MAX_BATCH_BYTES, "bytes": size})
        # The ledger takes one delay, traceparent and priority per call: group items by them.
        groups: dict[tuple[float, str | None, int], list[int]] = {}
        results: list[Admission | None] = [None] * len(valid)
        tasks = carries_tasks(queue)
        for position, item in enumerate(valid):
            if tasks and too_deep(item["payload"]):
                reason = "payload_too_deep"
                results[position] = Admission(item["request_id"], AdmissionStatus.REJECTED, reason)
                continue
            key = (item["delay"], item["traceparent"], item["priority"])
            groups.setdefault(key, []).append(position)
        for (delay, traceparent, priority), positions in groups.items():
            pairs = [(valid[p]["request_id"], valid[p]["payload"]) for p in positions]
            answers = ledger.admit_many(pairs, delay, traceparent, priority)
            for position, answer in zip(positions, answers, strict=True):
                results[position] = answer
        return Response({"results": [admission_data(r) for r in results if r is not None]})


def admission_response(admission: Admission, max_payload_bytes: int) -> Response:
    """Answer one admission: 201, 200, or the refusal with its stable code."""
    status = admission.status
    if status is AdmissionStatus.ADMITTED:
        return Response(admission_data(admission), status=201)
    if status is AdmissionStatus.DUPLICATE:
        return Response(admission_data(admission), status=200)
    reason = admission.reason or status.value.lower()
    details = {"request_id": admission.request_id, "reason": reason}
    if status is AdmissionStatus.CONFLICT:
        raise ApiError(
            409, reason, str(_CONFLICTS.get(reason, gettext("The id is taken."))), details
        )
    if status is AdmissionStatus.FULL:
        raise ApiError(
            503,
            "ledger_full",
            gettext("The queue holds its maximum number of records; retry later."),
            details,
            wait=api_settings.full_retry_after,
        )
    code = 413 if reason == "payload_too_large" else 400
    raise ApiError(code, reason, refusal_message(reason, max_payload_bytes), details)


def carries_tasks(queue: str) -> bool:
    """Whether ``queue`` carries Django tasks (a ``LedgerBackend`` serves it)."""
    from ...services.worker import task_queues

    return queue in task_queues()


def refusal_message(reason: str, max_payload_bytes: int) -> str:
    """Say in words why an admission was refused, with the limit it passed."""
    if reason == "payload_too_large":
        return gettext(
            "The payload is over this queue's limit of %(max)s bytes (UTF-8); raise the "
            "queue's MAX_PAYLOAD_BYTES or send less."
        ) % {"max": f"{max_payload_bytes:,}"}
    if reason in _REFUSALS:
        # Every refusal is formatted: the limits it names are filled in, the rest ignored.
        return str(_REFUSALS[reason]) % {
            "max_id_bytes": MAX_ID_BYTES,
            "max_depth": MAX_PAYLOAD_DEPTH,
        }
    return gettext("The request was refused (%(reason)s).") % {"reason": reason}


_REFUSALS = {
    "id_empty": gettext_lazy("The request id is empty."),
    "id_too_long": gettext_lazy("The request id is over %(max_id_bytes)s UTF-8 bytes."),
    "id_not_utf8": gettext_lazy("The request id is not valid Unicode (it holds a lone surrogate)."),
    "id_control_character": gettext_lazy(
        "The request id holds a control character (U+0000 to U+001F, U+007F to U+009F, "
        "U+2028 or U+2029)."
    ),
    "payload_not_utf8": gettext_lazy(
        "The payload is not valid Unicode (it holds a lone surrogate)."
    ),
    "payload_too_deep": gettext_lazy(
        "The task payload nests deeper than %(max_depth)s levels of arrays and objects (its "
        "own object and its args count two), which no reader takes."
    ),
    "traceparent_invalid": gettext_lazy(
        "The traceparent is not W3C trace context (00-<32 hex>-<16 hex>-<2 hex>)."
    ),
}


_CONFLICTS = {
    "payload_differs": gettext_lazy("The id was admitted with another payload."),
    "quarantined": gettext_lazy("The id is quarantined: an operator must discard or restore it."),
    "corrupt": gettext_lazy("The id's stored record is corrupt."),
    "workflow_step": gettext_lazy(
        "The id is a workflow's step waiting for its parents: only its workflow releases it."
    ),
}


def _request_id(body: str | None, header: str | None) -> str:
    if body is not None and header is not None and body != header:
        raise ApiError(
            400,
            "idempotency_key_mismatch",
            gettext("The Idempotency-Key header and the body's request_id differ."),
        )
    request_id = body if body is not None else header
    if request_id is None:
        raise invalid(
            {"request_id": [gettext("Send request_id in the body or the Idempotency-Key header.")]}
        )
    return request_id


def _batch_too_large(details: dict[str, int]) -> ApiError:
    return ApiError(
        413,
        "batch_too_large",
        gettext("A batch holds at most %(items)s items and %(bytes)s bytes; split it.")
        % {"items": MAX_BATCH, "bytes": MAX_BATCH_BYTES},
        details,
    )
