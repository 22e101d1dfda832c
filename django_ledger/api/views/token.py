"""The token endpoint: a username and a password in, the user's API token out."""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.utils.translation import gettext
from rest_framework.parsers import FormParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from ..errors import ApiError
from ..parsers import LedgerJSONParser
from ..schema import extend_schema, refusals
from ..serializers import TokenRequestSerializer, TokenSerializer
from ..user_tokens import user_token
from .base import LedgerAPIView

__all__ = ["TokenView"]

#: A username and a password, as JSON or as a form.
CREDENTIALS_BODY = 8 * 1024


@extend_schema(tags=["authentication"])
class TokenView(LedgerAPIView):
    # Open to anyone (it is how a client signs in), so nothing authenticates here:
    # a stale token in the headers does not stand in the way of getting a good one.
    authentication_classes = []
    permission_classes = [AllowAny]
    # A form too (``curl -d username=... -d password=...``, an HTML form).
    parser_classes = [LedgerJSONParser, FormParser]
    throttle_kind = "token"

    @extend_schema(
        operation_id="token",
        summary="Exchange a username and password for the user's API token",
        description=(
            "Answers the user's token, creating it on first use; the same token until it "
            "is reset (`manage.py ledger_token USERNAME --reset`). The body is JSON or "
            "a form (`application/x-www-form-urlencoded`). Throttled under the scope "
            "`ledger.token`, per client address: 10 a minute unless "
            '`REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]` sets another rate (or `None`).'
        ),
        request=TokenRequestSerializer,
        responses={200: TokenSerializer, **refusals(400, 413, 429)},
    )
    def post(self, request: Request) -> Response:
        """Answer the token of the active user the credentials name."""
        data = self.validated_body(TokenRequestSerializer, CREDENTIALS_BODY)
        user = authenticate(request._request, username=data["username"], password=data["password"])
        if user is None or not user.is_active:
            raise ApiError(
                400,
                "credentials_invalid",
                gettext("No active user has this username and password."),
            )
        key, _ = user_token(user)
        return Response({"token": key})
