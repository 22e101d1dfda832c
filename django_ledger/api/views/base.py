"""What every API view shares: authentication, permissions, throttles, parsing, errors.

Each class sets every DRF policy itself, so the project's ``REST_FRAMEWORK`` defaults
(authentication, permissions, parsers, renderers, negotiation, versioning, exception
handler, schema class) leave the API's contract as ``docs/api.md`` writes it. The
schema class is drf-spectacular's ``AutoSchema``; annotate a view's methods with
``django_ledger.api.schema.extend_schema``, which builds on it (drf-spectacular's own
builds on ``DEFAULT_SCHEMA_CLASS``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any, ClassVar

from django.utils.translation import gettext
from rest_framework import viewsets
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.metadata import SimpleMetadata
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.schemas.inspectors import ViewInspector
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from ... import conf
from ...core.sharded import AnyLedger
from ..conf import THROTTLE_SCOPES
from ..errors import ApiError, exception_handler
from ..parsers import LedgerJSONParser, LedgerJSONRenderer
from ..permissions import LedgerPermission
from ..schema import AutoSchema
from ..throttling import LedgerScopedThrottle

__all__ = ["LedgerAPIView", "LedgerViewSet"]

#: Bytes of JSON a body may take beyond what it carries (escapes, keys, tokens).
BODY_SLACK = 64 * 1024


class LedgerAPIView(APIView):
    """A view of the ledger API: its contract does not depend on project defaults."""

    # Token first: an anonymous call then answers 401 with WWW-Authenticate: Token.
    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [LedgerPermission]
    throttle_classes = [LedgerScopedThrottle]
    renderer_classes = [LedgerJSONRenderer]
    parser_classes = [LedgerJSONParser]
    content_negotiation_class = DefaultContentNegotiation
    metadata_class = SimpleMetadata
    versioning_class = None
    # drf-spectacular's, whatever REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] says.
    schema: ViewInspector | None = AutoSchema()
    #: The kind of call, whose throttle scope (``THROTTLE_SCOPES``) every call has.
    throttle_kind: ClassVar[str] = "read"

    @property
    def throttle_scope(self) -> str:
        return THROTTLE_SCOPES[self.throttle_kind]

    def get_exception_handler(self) -> Callable[..., Any]:
        return exception_handler

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        """Render every refusal as the API's JSON error, whatever renders the view's answers."""
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response) and response.exception:
            response.accepted_renderer = LedgerJSONRenderer()
            response.accepted_media_type = LedgerJSONRenderer.media_type
        return response

    def check_body_size(self, limit: int) -> None:
        """Refuse a body over ``limit`` bytes (plus slack) before reading it."""
        try:
            length = int(self.request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit * 6 + BODY_SLACK:
            # JSON may escape a byte in up to six: refuse only what cannot fit.
            raise ApiError(
                413,
                "body_too_large",
                gettext("The request body is larger than this endpoint accepts."),
                {"max_bytes": limit * 6 + BODY_SLACK},
            )

    def validated(self, serializer_class: type[Serializer[Any]], data: Any) -> dict[str, Any]:
        """Validate ``data`` with ``serializer_class`` (400 ``invalid`` if it fails)."""
        serializer = serializer_class(data=data)
        serializer.is_valid(raise_exception=True)
        result: dict[str, Any] = serializer.validated_data
        return result

    def validated_body(self, serializer_class: type[Serializer[Any]], limit: int) -> dict[str, Any]:
        """Refuse a body over ``limit`` bytes (``check_body_size``), then validate it."""
        self.check_body_size(limit)
        return self.validated(serializer_class, self.request.data)


class LedgerViewSet(LedgerAPIView, viewsets.ViewSet):
    """A ViewSet of the ledger API, with a permission and a throttle scope per action."""

    #: view action -> (ledger action whose permission it needs, throttle scope).
    #: A ledger action of None needs only an authenticated user.
    action_rules: ClassVar[dict[str, tuple[str | None, str]]] = {}

    @property
    def ledger_action(self) -> str | None:
        return self._rule[0]

    @property
    def throttle_scope(self) -> str:
        return THROTTLE_SCOPES[self._rule[1]]

    @property
    def _rule(self) -> tuple[str | None, str]:
        # OPTIONS (DRF's action "metadata") describes the route's own actions, so it
        # needs what they need: else it would tell anyone which queues exist.
        actions = [self.action or ""]
        if self.action == "metadata":
            actions = list(getattr(self, "action_map", {}).values())
        rules = [self.action_rules[a] for a in actions if a in self.action_rules]
        return rules[0] if rules else (None, "read")

    @cached_property
    def ledger(self) -> AnyLedger:
        """The ledger of the queue in the URL (the permission check has vetted it)."""
        return conf.get_ledger(self.kwargs["queue"])
