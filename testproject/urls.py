"""URLs of the test and demo project."""

from importlib.util import find_spec

from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from django.views.generic import RedirectView

from testproject.favicon import favicon


def _has_module(name: str) -> bool:
    # find_spec imports the parents of a dotted name, and raises if one is missing.
    try:
        return find_spec(name) is not None
    except ModuleNotFoundError:
        return False


# The project has no site of its own besides the admin: no "View site" link to a 404,
# and the root leads to the admin.
admin.site.site_url = None

urlpatterns: list[URLPattern | URLResolver] = [
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),
    path("admin/", admin.site.urls),
    # Browsers ask every site for it: an icon rather than a 404 on every page.
    path("favicon.ico", favicon, name="favicon"),
]

# The API arrives with django_ledger.api; until then the project serves the admin only.
if _has_module("django_ledger.api.urls"):
    urlpatterns.append(path("api/", include("django_ledger.api.urls")))
