"""The records changelist and the read-only record page."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse
from django.utils.html import format_html
from django.utils.translation import gettext, gettext_lazy

from .. import operations, permissions
from ..conf import get_ledger
from ..core.records import State
from ..models import LedgerEntry, Record
from .actions import OPERATIONS, ActionsAdmin, bulk_action
from .bulk import bulk_links, bulk_urls
from .cancel_actions import CANCEL, FAIL_OR_CANCEL
from .display import Label, bytes_count, escape_bytes, instant_text, pretty_payload, relative_text
from .filters import QueueFilter, ScoreRangeFilter, StateFilter
from .progress import progress_fragment
from .tasks import TaskFilter, attempt_limit, read_task, task_section
from .workflows import step_workflow_url, workflow_urls

__all__ = ["RecordAdmin"]

#: Bytes of a corrupt record shown before "show all".
RAW_PREVIEW = 4096


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@admin.register(Record)
class RecordAdmin(ActionsAdmin):
    operations = {
        "retry": OPERATIONS["retry"],
        "fail": FAIL_OR_CANCEL,
        "cancel": CANCEL,
        "purge": OPERATIONS["purge"],
    }
    list_display = (
        "request_id",
        "queue",
        "record_state",
        "due",
        "owner",
        "attempts",
        "fence",
        "lease",
        "updated",
        # Last, so the sort parameters (?o=) of the columns before it keep their numbers.
        "task_name",
    )
    list_display_links = ("request_id",)
    list_filter = (
        QueueFilter,
        StateFilter,
        ("due_at", ScoreRangeFilter),
        ("lease_until", ScoreRangeFilter),
        ("updated_at", ScoreRangeFilter),
        TaskFilter,  # last: it reads the records of the queues the others leave
    )
    search_fields = ("=request_id",)
    # Each index is sorted by its score alone: due time (pending), lease expiry
    # (claimed), end time (completed, failed, dead). Each time column sorts every
    # state's group by its own score.
    sortable_by = ("due", "lease", "updated")
    ordering = ("due_at",)
    actions = [bulk_action("retry"), bulk_action("fail"), bulk_action("purge")]

    @admin.display(description=gettext_lazy("state"))
    def record_state(self, obj: LedgerEntry) -> str:
        """The state, marked when the payload does not decode (the task filter notes it)."""
        if not obj.error or obj.state == "CORRUPT":
            return obj.state
        return format_html(
            '{}<br><span class="ledger-bad" title="{}">{}</span>',
            obj.state,
            obj.error,
            gettext("undecodable"),
        )

    @admin.display(description=gettext_lazy("task"), empty_value="")
    def task_name(self, obj: LedgerEntry) -> str:
        """The task a Django task record runs, read with the row ('' for a raw record): its
        function's name, the whole dotted path on hover (the list fits a 1,280 px screen)."""
        if not obj.task:
            return ""
        return format_html('<span title="{}">{}</span>', obj.task, obj.task.rsplit(".", 1)[-1])

    @admin.display(description=gettext_lazy("due at (UTC)"), ordering="due_at")
    def due(self, obj: LedgerEntry) -> str:
        return _when(obj.due_at)

    @admin.display(description=gettext_lazy("lease until (UTC)"), ordering="lease_until")
    def lease(self, obj: LedgerEntry) -> str:
        return _when(obj.lease_until)

    @admin.display(description=gettext_lazy("updated at (UTC)"), ordering="updated_at")
    def updated(self, obj: LedgerEntry) -> str:
        return _when(obj.updated_at)

    def get_rangefilter_due_at_title(self, request: HttpRequest, field_path: str) -> str:
        return gettext("due at (pending records, UTC)")

    def get_rangefilter_lease_until_title(self, request: HttpRequest, field_path: str) -> str:
        return gettext("lease until (claimed records, UTC)")

    def get_rangefilter_updated_at_title(self, request: HttpRequest, field_path: str) -> str:
        return gettext("ended at (completed, failed, dead, UTC)")

    def get_urls(self) -> list[URLPattern]:
        return [*workflow_urls(self), *bulk_urls(self), *super().get_urls()]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Links to act on everything the current filter matches (a preview comes first).
        extra = {**(extra_context or {}), "bulk_links": bulk_links(self, request)}
        return super().changelist_view(request, extra)

    def detail(self, request: HttpRequest, key: str, queue: str, request_id: str) -> HttpResponse:
        """Show one record as stored, every field, and the actions this user may take."""
        ledger = get_ledger(queue)
        if request.GET.get("fragment") == "progress":  # the live toggle: the bar alone
            return progress_fragment(request, ledger, request_id)
        snap = operations.snapshot(ledger, request_id)
        if snap is None:
            return self.not_found(request, key)
        now = ledger.shard_for(request_id).server_time_ms()  # the clock of its shard
        record = snap.record
        detail_url = self.change_url(key)
        title = gettext("Record %(request_id)s") % {"request_id": request_id}
        context = self.detail_context(request, key, queue, request_id, title)
        context |= {
            "workflow_url": step_workflow_url(queue, request_id),
            "snap": snap,
            "record": record,
            "full_url": f"{detail_url}?full=1",
            "size": len(snap.raw),
            "queue_url": reverse("admin:django_ledger_queue_change", args=(quote(queue),))
            if permissions.can(request.user, "view_queue", queue)
            else "",
            "quarantine_url": reverse(
                "admin:django_ledger_quarantinedrecord_change", args=(quote(key),)
            )
            if permissions.can(request.user, "view_quarantine", queue)
            else "",
        }
        full = request.GET.get("full") == "1"
        if record is not None:
            problem = read_task(record.payload)[1]
            if problem:
                # Shown as stored, escaped and cut like corrupt bytes: it may be huge.
                payload, cut = escape_bytes(record.payload.encode(), None if full else RAW_PREVIEW)
                is_json = False
            else:
                (payload, is_json), cut = pretty_payload(record.payload), False

            def at(ms: int | None) -> tuple[str, str]:
                return instant_text(ms), relative_text(ms, now)

            limit = gettext("of at most %(limit)s") % {"limit": attempt_limit(ledger, record)}
            fields = (
                (gettext_lazy("Request id"), record.request_id, ""),
                (gettext_lazy("Queue"), queue, ""),
                (gettext_lazy("State"), record.state.value, _state_note(record.state)),
                (
                    gettext_lazy("Due at"),
                    instant_text(record.due_at),
                    # How far off a waiting record's due time is; others wait no more.
                    relative_text(record.due_at, now) if record.state is State.PENDING else "",
                ),
                (gettext_lazy("Owner"), record.owner or "-", ""),
                (gettext_lazy("Attempts"), record.attempts, limit),
                (gettext_lazy("Fence"), record.fence, ""),
                (gettext_lazy("Lease until"), *at(record.lease_until)),
                (gettext_lazy("Created at"), *at(record.created_at)),
                (gettext_lazy("Updated at"), *at(record.updated_at)),
                (gettext_lazy("Traceparent"), record.traceparent or "-", ""),
                (gettext_lazy("Size"), bytes_count(len(snap.raw)), ""),
                (
                    gettext_lazy("Version"),
                    snap.version,
                    gettext("what an action compares before it writes"),
                ),
            )
            context.update(
                task=None if problem else task_section(ledger, record),
                payload=payload,
                payload_is_json=is_json,
                payload_problem=problem,
                payload_cut=cut,
                fields=[(Label.of(label), value, note) for label, value, note in fields],
            )
        else:
            raw_text, cut = escape_bytes(snap.raw, None if full else RAW_PREVIEW)
            context.update(raw_text=raw_text, raw_cut=cut)
        context["actions"] = self.action_links(request, key, queue, snap, detail_url)
        return TemplateResponse(request, "admin/django_ledger/record_detail.html", context)


def _state_note(state: State) -> str:
    return {
        State.PENDING: gettext("waiting to be claimed once due"),
        State.CLAIMED: gettext("held by its owner until the lease ends"),
        State.COMPLETED: gettext("ended: done"),
        State.FAILED: gettext("ended: failed"),
        State.DEAD: gettext("ended: out of attempts"),
    }[state]
