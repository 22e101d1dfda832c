"""The test project's URLs with the HTTP runner mounted (off in the project's own)."""

from django.urls import URLPattern, URLResolver, include, path

from testproject.urls import urlpatterns as project

urlpatterns: list[URLPattern | URLResolver] = [
    *project,
    path("ledger-runner/", include("django_ledger.api.runner_urls")),
]
