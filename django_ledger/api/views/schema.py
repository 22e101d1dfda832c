"""The schema and the Swagger UI page over it, served like every other endpoint.

Both need a signed-in user and refuse as the rest of the API does (the JSON error
document, 401 with ``WWW-Authenticate: Token``). The page's Swagger UI comes from
``drf_spectacular_sidecar``'s static files, never from a CDN, whatever
``SPECTACULAR_SETTINGS`` says.
"""

from __future__ import annotations

from django.templatetags.static import static
from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.renderers import TemplateHTMLRenderer

from ... import __version__
from .base import LedgerAPIView

__all__ = ["SIDECAR", "DocsView", "SchemaView"]

#: Where drf_spectacular_sidecar keeps Swagger UI among the static files.
SIDECAR = "drf_spectacular_sidecar/swagger-ui-dist/"


def package_version() -> str:
    """Return the installed django-ledger's version (the schema's ``info.version``)."""
    return __version__


class SchemaView(LedgerAPIView, SpectacularAPIView):
    """The OpenAPI schema, for signed-in users, left out of itself whatever the settings."""

    # The API's own title and version, whatever SPECTACULAR_SETTINGS says.
    custom_settings = {
        "TITLE": "django-ledger API",
        "DESCRIPTION": (
            "Admit, claim, renew and settle requests on the django-ledger delivery ledger "
            "(see 'The REST API' in the django-ledger docs)."
        ),
        "VERSION": package_version(),
    }

    renderer_classes = [
        OpenApiYamlRenderer,
        OpenApiYamlRenderer2,
        OpenApiJsonRenderer,
        OpenApiJsonRenderer2,
    ]
    schema = None  # left out of itself


class DocsView(LedgerAPIView, SpectacularSwaggerView):
    """The Swagger UI page over the schema, for signed-in users, served from the app."""

    renderer_classes = [TemplateHTMLRenderer]
    schema = None  # left out of the schema

    # drf-spectacular picks these from SPECTACULAR_SETTINGS (a CDN by default); the
    # API ships its own copy, so the page works offline and never loads another version.
    @staticmethod
    def _swagger_ui_resource(filename: str) -> str:
        return static(SIDECAR + filename)

    @staticmethod
    def _swagger_ui_favicon() -> str:
        return static(SIDECAR + "favicon-32x32.png")
