"""Queue health: each queue's counters, its gate, and what waits for repair."""

from __future__ import annotations

from functools import partial
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy

from .. import permissions
from ..conf import get_ledger, ledger_settings
from ..core.records import State, ms_to_datetime
from ..core.results import Stats
from ..models import Queue, Record
from ..services.placement import Placement, crowded_masters, crowding_hint, place_ledger
from . import charts, limits
from .base import PagesAdmin
from .display import Label, bytes_text, count_text, duration_text, instant_text, period_text
from .lookups import Spec
from .record_query import RecordQuery
from .workers import running_on
from .workflow_list import workflow_list_url

__all__ = ["QueueAdmin"]

#: Expired leases listed on a health page (the count is always exact).
EXPIRED_SAMPLE = 10
_GATE = {
    "close": (
        gettext_lazy("Close the gate"),
        gettext_lazy("Closed the gate"),
        gettext_lazy("No claim succeeds until the gate opens again."),
    ),
    "open": (
        gettext_lazy("Open the gate"),
        gettext_lazy("Opened the gate"),
        gettext_lazy("Workers claim due records again."),
    ),
}


#: A queue's figures on its health page, by the field of ``Stats`` each shows.
_FIGURES = (
    (gettext_lazy("Pending, due"), "pending_due"),
    (gettext_lazy("Pending, due later"), "pending_later"),
    (gettext_lazy("Claimed"), "claimed"),
    (gettext_lazy("Expired leases waiting for repair"), "expired_leases"),
    (gettext_lazy("Completed"), "completed"),
    (gettext_lazy("Failed"), "failed"),
    (gettext_lazy("Dead"), "dead"),
    (gettext_lazy("Quarantined"), "quarantined"),
    (gettext_lazy("Total records"), "total"),
)


@admin.register(Queue)
class QueueAdmin(PagesAdmin):
    view_action = "view_queue"
    actions = None

    def get_urls(self) -> list[URLPattern]:
        return [
            self.route("tasks/", self.tasks_page, "tasks"),
            self.route("<path:object_id>/limits/", partial(limits.change_view, self), "limits"),
            self.route("<path:object_id>/gate/<str:action>/", self.gate, "gate"),
            *super().get_urls(),
        ]

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        if object_id not in ledger_settings.queues or not self.can_view_queue(request, object_id):
            return None
        return Queue(key=object_id, queue=object_id)

    def overview(self, request: HttpRequest) -> HttpResponse:
        """List the queues this user may see, one stats snapshot each."""
        rows = []
        for name in permissions.allowed_queues(request.user, self.view_action):
            stats = get_ledger(name).stats()
            rows.append(
                {
                    "name": name,
                    "stats": stats,
                    # The health page's figures but the total.
                    "counts": [count_text(getattr(stats, field)) for _, field in _FIGURES[:-1]],
                    "oldest_due": duration_text(stats.oldest_due_age_ms),
                    "url": self.change_url(name),
                    "spark": charts.sparkline(charts.read_series(name, "hour")),
                }
            )
        context = {
            "tasks_url": self.url("tasks"),
            "workflow_links": [
                (name, workflow_list_url(name))
                for name in permissions.allowed_queues(request.user, "view")
            ],
            "rows": rows,
        }
        return self.render(request, "queue_list.html", gettext("Queues"), context)

    def detail_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Show one queue's health: its counters, gate, oldest due age and expired leases."""
        queue = object_id
        if queue not in ledger_settings.queues or not self.can_view_queue(request, queue):
            return self.not_found(request, queue)
        window = charts.window_of(request.GET.get("window"))
        if request.GET.get("fragment") == "charts":  # the live view: one script call
            return TemplateResponse(
                request, "admin/django_ledger/_charts.html", self.charts_context(queue, window)
            )
        ledger = get_ledger(queue)
        if len(ledger.shards) > 1:
            placed = place_ledger(ledger)  # each shard's counters, read once
            read = [p.stats for p in placed if p.stats is not None]
            # A shard that could not be read: ask again, for the page's own error.
            stats = Stats.summed(read) if len(read) == len(placed) else ledger.stats()
        else:
            stats = ledger.stats()
            placed = [
                Placement(queue, *ledger.shards[0].runner.placement(), stats)
            ]  # no round trip
        config = ledger_settings.queue(queue)
        can_see_records = permissions.can(request.user, "view", queue)
        expired: list[Any] = []
        if can_see_records and stats.expired_leases:
            spec = Spec(
                queues=(queue,), states=(State.CLAIMED,), bounds={"lease_until": (None, stats.now)}
            )
            expired = RecordQuery(Record, spec)[:EXPIRED_SAMPLE]
        # What workers run from it now, with each task's progress: to record viewers.
        running = running_on(request, queue, self.admin_site.name) if can_see_records else None
        context = {
            **limits.limits_context(request, queue),
            **self.charts_context(queue, window),
            "queue": queue,
            "stats": stats,
            "figures": [
                (Label.of(label), count_text(getattr(stats, field))) for label, field in _FIGURES
            ],
            "now": instant_text(stats.now),
            "oldest_due": duration_text(stats.oldest_due_age_ms),
            "oldest_due_at": instant_text(stats.oldest_due_at),
            "config": config,
            "placement": placed,
            "on_cluster": any(p.slot is not None for p in placed),
            "crowding": [
                crowding_hint(node, shards) for node, shards in crowded_masters(placed).items()
            ],
            "settings": [
                (Label.of(label), text)
                for label, text in (
                    (gettext_lazy("Most records"), count_text(config.max_records)),
                    (gettext_lazy("Most payload bytes"), bytes_text(config.max_payload_bytes)),
                    (gettext_lazy("Most attempts"), count_text(config.max_attempts)),
                    (gettext_lazy("Retention of ended records"), period_text(config.retention)),
                    (gettext_lazy("Default lease"), period_text(config.lease)),
                    (gettext_lazy("Shards"), count_text(config.shards)),
                )
            ],
            "can_operate": permissions.can(request.user, "operate", queue),
            "can_see_records": can_see_records,
            "can_see_quarantine": permissions.can(request.user, "view_quarantine", queue),
            "expired": expired,
            "running_row": None if running is None else {"running": running, "hidden": 0},
            "links": _links(queue, stats),
            "quarantine_url": reverse("admin:django_ledger_quarantinedrecord_changelist")
            + "?"
            + urlencode({"queue": queue}),
            "gate_url": self.url("gate", quote(queue), "open" if stats.gate_closed else "close"),
            "history_url": self.url("history", quote(queue)),
            "workflows_url": workflow_list_url(queue),
        }
        title = gettext("Queue %(queue)s") % {"queue": queue}
        return self.render(request, "queue_health.html", title, context)

    def charts_context(self, queue: str, window: str) -> dict[str, Any]:
        """The charts of one queue's counters over ``window``."""
        series = charts.read_series(queue, window)
        return {
            "window": window,
            "windows": charts.WINDOW_CHOICES,
            "charts": [
                charts.throughput_chart(series),
                charts.depth_chart(series),
                charts.line_chart(series, "wait"),
                charts.line_chart(series, "run"),
            ],
        }

    def tasks_page(self, request: HttpRequest) -> HttpResponse:
        """Each task name of the user's queues: runs, failure rate, run times."""
        self.need_view(request)
        window = charts.window_of(request.GET.get("window"))
        queues = permissions.allowed_queues(request.user, self.view_action)
        rows = charts.task_rows(
            [charts.read_series(name, window) for name in queues],
            reverse("admin:django_ledger_record_changelist"),
        )
        for row in rows:  # the records list only for those who may see records
            if not permissions.can(request.user, "view", row["queue"]):
                row["url"] = None
        context = {"rows": rows, "window": window, "windows": charts.WINDOW_CHOICES}
        return self.render(request, "task_list.html", gettext("Tasks"), context)

    def gate(self, request: HttpRequest, object_id: str, action: str) -> HttpResponse:
        """GET: confirm closing or opening the gate; POST: do it."""
        queue = unquote(object_id)
        if action not in _GATE or queue not in ledger_settings.queues:
            raise Http404("no such gate action")
        if not self.can_view_queue(request, queue) or not permissions.can(
            request.user, "operate", queue
        ):
            raise PermissionDenied
        ledger = get_ledger(queue)
        label, done, effect = _GATE[action]
        if request.method == "POST":
            if action == "close":
                ledger.close_gate()
            else:
                ledger.open_gate()
            self.log_change(request, Queue(key=queue, queue=queue), str(done))
            self.message_user(
                request,
                gettext("%(done)s of queue %(queue)s.") % {"done": done, "queue": queue},
                messages.SUCCESS,
            )
            return HttpResponseRedirect(self.change_url(queue))
        title = gettext("%(label)s of queue %(queue)s: are you sure?") % {
            "label": label,
            "queue": queue,
        }
        context = {
            "queue": queue,
            "label": label,
            "effect": effect,
            "gate_closed": ledger.gate_closed,
            "cancel_url": self.change_url(queue),
        }
        return self.render(request, "confirm_gate.html", title, context)


def _links(queue: str, stats: Stats) -> dict[str, str]:
    """Record list links: by state, due now, and expired leases (as of the snapshot)."""
    base = reverse("admin:django_ledger_record_changelist")
    # To the millisecond: "expired" means a lease ended at or before the snapshot.
    now = timezone.localtime(ms_to_datetime(stats.now))
    date, time = now.strftime("%Y-%m-%d"), now.strftime("%H:%M:%S.%f")[:-3]

    def link(**params: str) -> str:
        return base + "?" + urlencode({"queue": queue, **params})

    return {
        "all": link(),
        **{state.value: link(state=state.value) for state in State},
        "due": link(state="PENDING", due_at__range__lte_0=date, due_at__range__lte_1=time),
        "expired": link(
            state="CLAIMED", lease_until__range__lte_0=date, lease_until__range__lte_1=time
        ),
    }
