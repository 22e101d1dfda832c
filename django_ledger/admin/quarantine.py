"""The quarantine: ids whose stored bytes failed to decode, set aside by repair."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext, gettext_lazy

from .. import operations
from ..conf import get_ledger
from ..models import LedgerEntry, QuarantinedRecord
from .actions import OPERATIONS, ActionsAdmin, bulk_action
from .base import record_url
from .display import bytes_count, decode_error, escape_bytes
from .filters import QueueFilter
from .lookups import ALL_STATES, Spec, UnsupportedLookup, join_key
from .query import LedgerQuery, run_script, spans

__all__ = ["QuarantineQuery", "QuarantinedRecordAdmin"]

#: Bytes shown in the list, and on the detail page before "show all".
LIST_PREVIEW = 60
DETAIL_PREVIEW = 4096


class QuarantineQuery(LedgerQuery):
    """Quarantined ids of the queues in the spec, in each quarantine's hash order."""

    def check_spec(self, spec: Spec) -> None:
        if spec.bounds or set(spec.states) != set(ALL_STATES):
            raise UnsupportedLookup(
                gettext("quarantined records have no state or times to filter by")
            )

    def counts(self) -> dict[str, int]:
        """Return each queue's quarantine size (a sharded queue's: its shards', summed)."""
        if self._cached_counts is None:
            sizes = {}
            for queue in () if self.spec.empty else self.spec.queues:
                ledger = self.ledger(queue)
                with ledger.translate_errors():
                    per_shard = [
                        int(shard.redis.hlen(shard.quarantine_key)) for shard in ledger.shards
                    ]
                self._cached_shard_counts[queue] = per_shard
                sizes[queue] = sum(per_shard)
            self._cached_counts = sizes
        return self._cached_counts

    def page(self, start: int, stop: int) -> list[LedgerEntry]:
        # A sharded queue's quarantine is its shards' quarantines, one after another.
        self.counts()
        parts = [
            ((queue, shard), size)
            for queue, sizes in self._cached_shard_counts.items()
            for shard, size in zip(self.ledger(queue).shards, sizes, strict=True)
        ]
        out: list[LedgerEntry] = []
        for (queue, shard), offset, want in spans(parts, start, stop - start):
            reply = run_script(shard, "admin_quarantine", [offset, want])
            out += self.build(queue, reply[1:])
        return out

    def found(self) -> list[LedgerEntry]:
        if self._cached_found is None:
            found: list[LedgerEntry] = []
            for queue, ids in self.wanted().items():
                for shard, mine in self.by_shard(queue, ids):
                    reply = run_script(shard, "admin_quarantine", [0, 0, *mine])
                    found += self.build(queue, reply[1:])
            self._cached_found = found
        return self._cached_found

    def build(self, queue: str, flat: list[Any]) -> list[LedgerEntry]:
        """Turn ``admin_quarantine.lua`` triples into model instances."""
        rows = []
        for i in range(0, len(flat), 3):
            raw_id, quarantined = flat[i : i + 2]
            request_id = raw_id.decode("utf-8", "replace")
            row = self.model(
                key=join_key(queue, request_id),
                request_id=request_id,
                queue=queue,
                state="CORRUPT",
                size=len(quarantined),
                error=decode_error(request_id, quarantined) or gettext("decodes now"),
            )
            row.quarantined_bytes = quarantined
            rows.append(row)
        return rows


@admin.register(QuarantinedRecord)
class QuarantinedRecordAdmin(ActionsAdmin):
    view_action = "view_quarantine"
    operations = {name: OPERATIONS[name] for name in ("discard", "restore")}
    needs_quarantine = True
    query_class = QuarantineQuery
    list_display = ("request_id", "queue", "size", "preview", "error")
    list_display_links = ("request_id",)
    list_filter = (QueueFilter,)
    search_fields = ("=request_id",)
    # A quarantine is a hash: it has no order to sort by.
    sortable_by = ()
    list_per_page = 50
    actions = [bulk_action("discard"), bulk_action("restore")]

    @admin.display(description=gettext_lazy("bytes (escaped)"))
    def preview(self, obj: LedgerEntry) -> str:
        text, cut = escape_bytes(obj.quarantined_bytes or b"", LIST_PREVIEW)
        return text + ("…" if cut else "")

    def detail(self, request: HttpRequest, key: str, queue: str, request_id: str) -> HttpResponse:
        """Show the quarantined bytes safely, why they fail, and what is stored now."""
        snap = operations.snapshot(get_ledger(queue), request_id)
        if snap is None or snap.quarantined is None:
            return self.not_found(request, key)
        detail_url = self.change_url(key)
        full = request.GET.get("full") == "1"
        raw_text, cut = escape_bytes(snap.quarantined, None if full else DETAIL_PREVIEW)
        if not snap.raw:
            stored = gettext("nothing: the id is no longer in the records")
        elif snap.raw == snap.quarantined:
            stored = gettext("the same bytes")
        else:
            stored = gettext("other bytes (%(size)s)") % {"size": bytes_count(len(snap.raw))}
        title = gettext("Quarantined record %(request_id)s") % {"request_id": request_id}
        context = self.detail_context(request, key, queue, request_id, title)
        context |= {
            "snap": snap,
            "size": len(snap.quarantined),
            "reason": decode_error(request_id, snap.quarantined)
            or gettext("none: these bytes decode now"),
            "raw_text": raw_text,
            "raw_cut": cut,
            "full_url": f"{detail_url}?full=1",
            "stored": stored,
            "stored_error": snap.error if snap.raw else "",
            "record_url": record_url(queue, request_id),
            "actions": self.action_links(request, key, queue, snap, self.changelist_url()),
        }
        return TemplateResponse(request, "admin/django_ledger/quarantine_detail.html", context)
