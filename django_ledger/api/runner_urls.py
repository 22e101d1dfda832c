"""The HTTP runner's URL, apart from the API's: mount it only where tasks may run in requests.

``path("ledger-runner/", include("django_ledger.api.runner_urls"))`` serves
``POST ledger-runner/queues/<queue>/run/`` (``docs/serverless.md``).
"""

from __future__ import annotations

from django.urls import URLPattern, path

from .views.runner import RunnerViewSet

app_name = "django_ledger_runner"

urlpatterns: list[URLPattern] = [
    path("queues/<str:queue>/run/", RunnerViewSet.as_view({"post": "run"}), name="run"),
]
