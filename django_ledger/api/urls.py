"""The API's URLs: mount them with ``path("api/", include("django_ledger.api.urls"))``."""

from __future__ import annotations

from django.urls import URLPattern, path, re_path, register_converter

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
from .views.bulk import BulkViewSet
from .views.cancel import CancelViewSet
from .views.limits import LimitsViewSet
from .views.schedules import ScheduleViewSet
from .views.series import SeriesViewSet
from .views.workflows import WorkflowViewSet

app_name = "django_ledger_api"


class RequestIdConverter:
    """Any text, slashes and control characters included: the ledger judges the id."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(RequestIdConverter, "ledger_request_id")


Q = "queues/<str:queue>/"

S = "schedules/<str:key>/"

urlpatterns: list[URLPattern] = [
    path("token/", TokenView.as_view(), name="token"),
    path(
        "schedules/",
        ScheduleViewSet.as_view({"get": "list", "post": "create"}),
        name="schedules",
    ),
    path(
        S,
        ScheduleViewSet.as_view({"get": "read", "put": "change", "delete": "remove"}),
        name="schedule",
    ),
    path(S + "pause/", ScheduleViewSet.as_view({"post": "pause"}), name="schedule-pause"),
    path(S + "resume/", ScheduleViewSet.as_view({"post": "resume"}), name="schedule-resume"),
    path("queues/", QueueViewSet.as_view({"get": "queues"}), name="queues"),
    path(Q + "admit/", AdmissionViewSet.as_view({"post": "admit"}), name="admit"),
    path(Q + "admit/batch/", AdmissionViewSet.as_view({"post": "admit_batch"}), name="admit-batch"),
    path(Q + "claims/", ClaimViewSet.as_view({"post": "claim"}), name="claim"),
    path(Q + "claims/renew/", ClaimViewSet.as_view({"post": "renew"}), name="renew"),
    path(
        Q + "claims/renew/batch/",
        ClaimViewSet.as_view({"post": "renew_batch"}),
        name="renew-batch",
    ),
    path(Q + "claims/settle/", ClaimViewSet.as_view({"post": "settle"}), name="settle"),
    path(
        Q + "claims/settle/batch/",
        ClaimViewSet.as_view({"post": "settle_batch"}),
        name="settle-batch",
    ),
    path(Q + "records/", RecordViewSet.as_view({"get": "list"}), name="records"),
    # Before records/<id>: a request id may hold "/" (the converter), so the action
    # routes must be tried first (a record whose id is "bulk/" is read by resolve/?ids=).
    path(Q + "records/bulk/", BulkViewSet.as_view({"post": "bulk"}), name="records-bulk"),
    path(
        Q + "records/<ledger_request_id:request_id>/cancel/",
        CancelViewSet.as_view({"post": "cancel"}),
        name="record-cancel",
    ),
    path(
        Q + "records/<ledger_request_id:request_id>",
        RecordViewSet.as_view({"get": "retrieve"}),
        name="record",
    ),
    path(Q + "resolve/", RecordViewSet.as_view({"get": "resolve"}), name="resolve"),
    # results/{id}/ as every other path; the slash is optional, never part of the id
    # (an id that ends in "/" is read with the slash after it: results/a%2F/).
    re_path(
        r"^queues/(?P<queue>[^/]+)/results/(?P<request_id>[\s\S]+?)/?$",
        TaskResultViewSet.as_view({"get": "retrieve"}),
        name="task-result",
    ),
    path(Q + "stats/", QueueViewSet.as_view({"get": "stats"}), name="stats"),
    path(Q + "series/", SeriesViewSet.as_view({"get": "series"}), name="series"),
    path(Q + "quarantine/", QuarantineViewSet.as_view({"get": "list"}), name="quarantine"),
    path(Q + "repair/", QueueViewSet.as_view({"post": "repair"}), name="repair"),
    path(Q + "gate/", QueueViewSet.as_view({"post": "gate"}), name="gate"),
    path(Q + "limits/", LimitsViewSet.as_view({"get": "read"}), name="limits"),
    path(
        Q + "limits/change/",
        LimitsViewSet.as_view({"post": "change"}),
        name="limits-change",
    ),
    path(
        Q + "workflows/<ledger_request_id:workflow_id>/",
        WorkflowViewSet.as_view({"get": "retrieve"}),
        name="workflow",
    ),
    path("dispatch/log/", DispatchViewSet.as_view({"post": "log"}), name="dispatch-log"),
    path("dispatch/find/", DispatchViewSet.as_view({"get": "find"}), name="dispatch-find"),
    path("dispatch/check/", DispatchViewSet.as_view({"get": "check"}), name="dispatch-check"),
    path("dispatch/claim/", DispatchViewSet.as_view({"post": "claim"}), name="dispatch-claim"),
    path("schema/", SchemaView.as_view(), name="schema"),
    path(
        "docs/",
        DocsView.as_view(url_name="django_ledger_api:schema"),
        name="docs",
    ),
]
