"""OpenAPI pieces the views share: path parameters, error responses, headers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from .serializers import ErrorSerializer

__all__ = ["IDEMPOTENCY_KEY", "QUEUE", "REQUEST_ID", "RETRY_AFTER", "errors", "refusals"]

QUEUE = OpenApiParameter(
    "queue",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="A queue configured in LEDGER['QUEUES'] that you may reach.",
    pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$",
)
REQUEST_ID = OpenApiParameter(
    "request_id",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description=(
        "The request id, percent-encoded. Any id works here; the pattern leaves out "
        "'/' and a leading '.' only because some clients rewrite such paths: read "
        "those ids with the resolve endpoint (?ids=) to be safe."
    ),
    pattern=r"^[^\x00-\x1f\x7f/.][^\x00-\x1f\x7f/]{0,255}$",
)
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="The request id, when the body does not carry one (they must agree if both do).",
)
RETRY_AFTER = OpenApiParameter(
    "Retry-After",
    OpenApiTypes.INT,
    OpenApiParameter.HEADER,
    description="Seconds to wait before trying again.",
    response=[429, 503],
)

_MEANINGS = {
    400: "Invalid request (error.code says why).",
    401: "Not authenticated.",
    403: "No permission for this action.",
    404: "Unknown queue, or not found.",
    409: "Conflict (error.code says why).",
    413: "Too large.",
    415: "The body is not application/json.",
    429: "Throttled; see Retry-After.",
    503: "Ledger full or Redis unavailable; see Retry-After.",
}


def errors(*statuses: int) -> dict[int, Any]:
    """Document error responses: 401, 403, 429 and 503 always, plus ``statuses``."""
    return refusals(401, 403, 429, 503, *statuses)


def refusals(*statuses: int) -> dict[int, Any]:
    """Document the error responses ``statuses``, and no others."""
    return {
        status: OpenApiResponse(ErrorSerializer, description=_MEANINGS[status])
        for status in sorted(set(statuses))
    }
