"""The API's URLs: mount them with ``path("api/", include("django_ledger.api.urls"))``."""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, path, re_path, register_converter
from django.urls.converters import StringConverter

from .views import (
    AdmissionViewSet,
    ClaimViewSet,
    DispatchViewSet,
    DocsView,
    QuarantineViewSet,
    QueueViewSet,
    RecordViewSet,
    SchemaView,
    TaskResultViewSet,
    TokenView,
)
from .views.base import LedgerViewSet
from .views.bulk import BulkViewSet
from .views.cancel import CancelViewSet
from .views.limits import LimitsViewSet
from .views.schedules import ScheduleViewSet
from .views.series import SeriesViewSet
from .views.workflows import WorkflowViewSet

app_name = "django_ledger_api"


class RequestIdConverter(StringConverter):
    """Any text, slashes and control characters included: the ledger judges the id."""

    regex = r"[\s\S]+"


register_converter(RequestIdConverter, "ledger_request_id")


Q = "queues/<str:queue>/"

S = "schedules/<str:key>/"

R = Q + "records/<ledger_request_id:request_id>"

# (route, view set, its actions, name), in the order they are tried.
_ROUTES: list[tuple[str, type[LedgerViewSet], dict[str, Any], str]] = [
    ("schedules/", ScheduleViewSet, {"get": "list", "post": "create"}, "schedules"),
    (S, ScheduleViewSet, {"get": "read", "put": "change", "delete": "remove"}, "schedule"),
    (S + "pause/", ScheduleViewSet, {"post": "pause"}, "schedule-pause"),
    (S + "resume/", ScheduleViewSet, {"post": "resume"}, "schedule-resume"),
    ("queues/", QueueViewSet, {"get": "queues"}, "queues"),
    (Q + "admit/", AdmissionViewSet, {"post": "admit"}, "admit"),
    (Q + "admit/batch/", AdmissionViewSet, {"post": "admit_batch"}, "admit-batch"),
    (Q + "claims/", ClaimViewSet, {"post": "claim"}, "claim"),
    (Q + "claims/renew/", ClaimViewSet, {"post": "renew"}, "renew"),
    (Q + "claims/renew/batch/", ClaimViewSet, {"post": "renew_batch"}, "renew-batch"),
    (Q + "claims/settle/", ClaimViewSet, {"post": "settle"}, "settle"),
    (Q + "claims/settle/batch/", ClaimViewSet, {"post": "settle_batch"}, "settle-batch"),
    (Q + "records/", RecordViewSet, {"get": "list"}, "records"),
    # Before records/<id>: a request id may hold "/" (the converter), so the action
    # routes must be tried first (a record whose id is "bulk/" is read by resolve/?ids=).
    (Q + "records/bulk/", BulkViewSet, {"post": "bulk"}, "records-bulk"),
    (R + "/cancel/", CancelViewSet, {"post": "cancel"}, "record-cancel"),
    (R, RecordViewSet, {"get": "retrieve"}, "record"),
    (Q + "resolve/", RecordViewSet, {"get": "resolve"}, "resolve"),
    # results/{id}/ as every other path; the slash is optional, never part of the id
    # (an id that ends in "/" is read with the slash after it: results/a%2F/).
    (
        r"^queues/(?P<queue>[^/]+)/results/(?P<request_id>[\s\S]+?)/?$",
        TaskResultViewSet,
        {"get": "retrieve"},
        "task-result",
    ),
    (Q + "stats/", QueueViewSet, {"get": "stats"}, "stats"),
    (Q + "series/", SeriesViewSet, {"get": "series"}, "series"),
    (Q + "quarantine/", QuarantineViewSet, {"get": "list"}, "quarantine"),
    (Q + "repair/", QueueViewSet, {"post": "repair"}, "repair"),
    (Q + "gate/", QueueViewSet, {"post": "gate"}, "gate"),
    (Q + "limits/", LimitsViewSet, {"get": "read"}, "limits"),
    (Q + "limits/change/", LimitsViewSet, {"post": "change"}, "limits-change"),
    (
        Q + "workflows/<ledger_request_id:workflow_id>/",
        WorkflowViewSet,
        {"get": "retrieve"},
        "workflow",
    ),
    ("dispatch/log/", DispatchViewSet, {"post": "log"}, "dispatch-log"),
    ("dispatch/find/", DispatchViewSet, {"get": "find"}, "dispatch-find"),
    ("dispatch/check/", DispatchViewSet, {"get": "check"}, "dispatch-check"),
    ("dispatch/claim/", DispatchViewSet, {"post": "claim"}, "dispatch-claim"),
]

urlpatterns: list[URLPattern] = [
    path("token/", TokenView.as_view(), name="token"),
    *(
        # A route written as a regular expression starts with "^".
        (re_path if route.startswith("^") else path)(route, view.as_view(actions), name=name)
        for route, view, actions, name in _ROUTES
    ),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", DocsView.as_view(url_name="django_ledger_api:schema"), name="docs"),
]
