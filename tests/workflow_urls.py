"""The test project's URLs plus the workflow pages (admin and API), as the integration mounts them.

Until ``admin/records.py`` and ``api/urls.py`` carry the two lines, the workflow tests
run on this URLconf (``override_settings(ROOT_URLCONF=...)``).
"""

from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path

from django_ledger.admin.workflows import workflow_urls
from django_ledger.api import urls as api_urls
from django_ledger.api.views.workflows import WorkflowViewSet

_api: list[URLPattern | URLResolver] = [
    *api_urls.urlpatterns,
    path(
        api_urls.Q + "workflows/<ledger_request_id:workflow_id>/",
        WorkflowViewSet.as_view({"get": "retrieve"}),
        name="workflow",
    ),
]

urlpatterns: list[URLPattern | URLResolver] = [
    path(
        "admin/", ([*workflow_urls(admin.site), *admin.site.get_urls()], "admin", admin.site.name)
    ),
    path("api/", include((_api, "django_ledger_api"))),
]
