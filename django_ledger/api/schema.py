"""OpenAPI pieces the views share: the schema class, path parameters, errors, headers.

The ledger's views document themselves with drf-spectacular's ``AutoSchema`` whatever
the project's ``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]`` is (a project may generate its
own views' schema with another tool): each view class sets ``schema`` (``LedgerAPIView``),
and ``extend_schema`` here builds a view method's annotations on that class.
drf-spectacular's own decorator builds a method's on ``DEFAULT_SCHEMA_CLASS``, read
when the view module is imported.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.plumbing import is_list_serializer
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from drf_spectacular.utils import extend_schema as spectacular_extend_schema
from rest_framework import serializers

from .serializers import ErrorSerializer

__all__ = [
    "IDEMPOTENCY_KEY",
    "QUEUE",
    "REQUEST_ID",
    "RETRY_AFTER",
    "AutoSchema",
    "errors",
    "extend_schema",
    "refusals",
]

F = TypeVar("F", bound=Callable[..., Any])


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's ``AutoSchema``, with what every ledger operation answers.

    Every operation negotiates its answer (406 when ``Accept`` excludes JSON); one that
    takes a body refuses another media type (415) and a body larger than it accepts
    (413). What the server refuses blank or empty is documented so (``minLength``,
    ``minItems``), whatever ``SPECTACULAR_SETTINGS`` says.
    """

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        responses: dict[str, Any] = operation.setdefault("responses", {})
        statuses = [406]
        if "requestBody" in operation:
            statuses += [413, 415]
        for status, response in refusals(*statuses).items():
            if str(status) not in responses:
                responses[str(status)] = self._get_response_for_code(response, str(status))  # type: ignore[no-untyped-call]
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def get_override_parameters(self) -> list[Any]:
        # Every operation may answer 429 or 503, which say when to retry.
        return [RETRY_AFTER]

    def _map_serializer_field(
        self, field: Any, direction: str, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(  # type: ignore[no-untyped-call]
            field, direction, bypass_extensions
        )
        if direction != "request" or not isinstance(schema, dict):
            return schema
        blank = getattr(field, "allow_blank", True)
        if isinstance(field, serializers.CharField) and not blank and "enum" not in schema:
            schema["minLength"] = max(schema.get("minLength", 0), 1)
        listed = is_list_serializer(field) or isinstance(field, serializers.ListField)
        if listed and not field.allow_empty and schema.get("type") == "array":
            schema["minItems"] = max(schema.get("minItems", 0), 1)
        return schema


def extend_schema(**kwargs: Any) -> Callable[[F], F]:
    """Return drf-spectacular's ``extend_schema(**kwargs)``, built on its ``AutoSchema``.

    A view method's annotation takes its base class from the method's
    ``kwargs["schema"]`` before ``DEFAULT_SCHEMA_CLASS``: set there, it is the ledger's
    whatever the project's setting. A view class takes its own ``schema``.
    """
    decorate = spectacular_extend_schema(**kwargs)

    def decorator(view: F) -> F:
        if inspect.isclass(view):
            _build_methods_on_class_schema(decorate(view))
            return view
        if not hasattr(view, "kwargs"):
            view.kwargs = {}  # type: ignore[attr-defined]
        view.kwargs.setdefault("schema", AutoSchema)  # type: ignore[attr-defined]
        return decorate(view)

    return decorator


def _build_methods_on_class_schema(view_class: Any) -> None:
    """Build each annotated method's schema on its class's annotated one.

    drf-spectacular does so for the methods it knows (HTTP methods, CRUD, ``@action``)
    and rebuilds the others when it generates, on ``DEFAULT_SCHEMA_CLASS``; a ViewSet
    method routed by name (``{"get": "check"}``) is one of those others.
    """
    base = type(view_class.schema)
    for member in vars(view_class).values():
        own = getattr(member, "kwargs", None)
        schema = own.get("schema") if isinstance(own, dict) else None
        if isinstance(schema, type) and not issubclass(schema, base):
            own["schema"] = type("ExtendedMetaSchema", (schema, base), {})  # type: ignore[index]


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
    406: "The Accept header excludes JSON.",
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
