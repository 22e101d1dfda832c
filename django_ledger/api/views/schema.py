"""The schema endpoint."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request

__all__ = ["SchemaView"]


class SchemaView(SpectacularAPIView):
    """The OpenAPI schema, public, and left out of itself whatever the project's settings."""

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().get(request, *args, **kwargs)  # type: ignore[no-untyped-call]
        return response
