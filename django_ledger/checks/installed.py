"""What the admin and the API need beside the app: apps in ``INSTALLED_APPS``.

The API's views choose their own schema class (``django_ledger.api.schema``): the
project's ``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]`` is its own business."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.translation import gettext

from .base import error as _error

__all__ = ["API_APPS", "check_api", "check_rangefilter"]

#: What the REST API needs in ``INSTALLED_APPS``, and what for.
API_APPS = {
    "rest_framework": "Django REST framework",
    "rest_framework.authtoken": "token authentication, /api/token/ and ledger_token",
    "drf_spectacular": "the templates of the /api/docs/ page",
}
#: Swagger UI's files for the /api/docs/ page: without them the page is blank (W041).
DOCS_ASSETS_APP = "drf_spectacular_sidecar"


def check_rangefilter(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """The admin's date-range filters need ``rangefilter`` in ``INSTALLED_APPS``.

    Only where the admin is installed: a project without it (a worker's settings, an
    API-only service) shows no ledger admin page, so needs no filter of one.
    """
    if apps.is_installed("rangefilter") or not apps.is_installed("django.contrib.admin"):
        return []
    return [
        _error(
            40,
            gettext(
                "'rangefilter' is not in INSTALLED_APPS; the ledger admin's date-range filters "
                "need it."
            ),
            gettext(
                "Add 'rangefilter' (from django-admin-rangefilter) to INSTALLED_APPS, or leave "
                "'django.contrib.admin' out of a project that shows no admin."
            ),
            "INSTALLED_APPS",
        )
    ]


def check_api(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A project that mounts the REST API needs its apps (and the docs page, its files)."""
    if not getattr(settings, "ROOT_URLCONF", None) or not _api_mounted():
        return []
    return _missing_apps() + _docs_assets()


def _missing_apps() -> list[checks.CheckMessage]:
    return [
        _error(
            41,
            gettext(
                "%(app)r is not in INSTALLED_APPS; the ledger API, which the URLs mount, needs "
                "it for %(purpose)s."
            )
            % {"app": app, "purpose": purpose},
            gettext(
                "Add %(app)r to INSTALLED_APPS (see 'Mounting it' in 'The REST API' of the "
                "django-ledger docs), and migrate."
            )
            % {"app": app},
            "INSTALLED_APPS",
        )
        for app, purpose in API_APPS.items()
        if not apps.is_installed(app)
    ]


def _docs_assets() -> list[checks.CheckMessage]:
    if apps.is_installed(DOCS_ASSETS_APP):
        return []
    return [
        checks.Warning(
            gettext(
                "%(app)r is not in INSTALLED_APPS; the ledger API works, but its "
                "/api/docs/ page has no Swagger UI files to load (a blank page)."
            )
            % {"app": DOCS_ASSETS_APP},
            hint=(
                gettext(
                    "pip install drf-spectacular-sidecar, add %(app)r to "
                    "INSTALLED_APPS, and run collectstatic (see 'Mounting it' in 'The REST API' of "
                    "the django-ledger docs)."
                )
                % {"app": DOCS_ASSETS_APP}
            ),
            obj="INSTALLED_APPS",
            id="django_ledger.W041",
        )
    ]


def _api_mounted() -> bool:
    """Say whether the project's URLs route to a view of ``django_ledger.api``."""
    return any(
        getattr(getattr(pattern.callback, "cls", None), "__module__", "").startswith(
            "django_ledger.api."
        )
        for pattern in _patterns(get_resolver().url_patterns)
    )


def _patterns(patterns: Sequence[Any]) -> Iterator[URLPattern]:
    """Yield every URL pattern, included ones too, without recursion."""
    stack = list(patterns)
    while stack:
        pattern = stack.pop()
        if isinstance(pattern, URLResolver):
            stack.extend(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            yield pattern
