"""The schema endpoint."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request

__all__ = ["DocsView", "SchemaView"]


class SchemaView(SpectacularAPIView):
    """The OpenAPI schema, for signed-in users, left out of itself whatever the settings."""

    # Like every endpoint of the API: authenticated (by token or session), never public.
    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().get(request, *args, **kwargs)  # type: ignore[no-untyped-call]
        return response


class DocsView(SpectacularSwaggerView):
    """The browsable docs page over the schema, for signed-in users."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
