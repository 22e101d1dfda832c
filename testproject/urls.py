"""URLs of the test and demo project."""

from importlib.util import find_spec

from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path


def _has_module(name: str) -> bool:
    # find_spec imports the parents of a dotted name, and raises if one is missing.
    try:
        return find_spec(name) is not None
    except ModuleNotFoundError:
        return False


urlpatterns: list[URLPattern | URLResolver] = [
    path("admin/", admin.site.urls),
]

# The API arrives with django_ledger.api; until then the project serves the admin only.
if _has_module("django_ledger.api.urls"):
    urlpatterns.append(path("api/", include("django_ledger.api.urls")))
