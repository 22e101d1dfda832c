"""Schedules: each one in words, its next fires, its last dispatches; pause, resume, fire now.

The list and the detail read ``LEDGER['SCHEDULES']``, the scheduler's state in Redis and
the dispatch registry; the list also shows what every scheduler node publishes it runs,
marking a schedule this process's settings lack. A user sees the schedules whose queue they reach, with
``view_schedule``; ``operate_schedule`` lets them pause, resume and trigger. A pause is
kept in Redis and honoured by every scheduler at its next tick.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern
from django.utils.translation import gettext, gettext_lazy

from .. import permissions
from ..conf import get_dispatch_registry, ledger_settings
from ..core.counters import Counters
from ..core.dispatch import Dispatch
from ..core.schedule import (
    Fire,
    Running,
)
from ..models import Schedule
from ..schedules.config import ScheduleConfig
from ..services import runtime_schedules as runtime
from ..services import scheduler
from .base import record_url
from .display import instant_text
from .schedule_edit import ScheduleEditing
from .schedule_rows import (
    is_active,
    local_of,
    local_text,
    running_row,
    settings_rows,
    state_text,
    unrun_row,
    utc_of,
    utc_text,
)

__all__ = ["ScheduleAdmin"]

#: Next fires on the detail page, and dispatches shown there.
NEXT_FIRES: Final = 10
HISTORY: Final = 20
_UTC_ZONES: Final = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"}
)
_ACTIONS: Final = {
    "pause": (gettext_lazy("Pause"), gettext_lazy("Paused"), gettext_lazy(
        "No scheduler admits its fires until it is resumed; fires that come due meanwhile "
        "are not run later.")),
    "resume": (gettext_lazy("Resume"), gettext_lazy("Resumed"), gettext_lazy(
        "Schedulers admit its fires again from their next tick; fires that came due while "
        "it was paused are not run.")),
    "trigger": (gettext_lazy("Fire now"), gettext_lazy("Fired"), gettext_lazy(
        "One fire is admitted now, apart from the schedule (request id "
        "schedule:KEY:manual:EPOCH); the next scheduled fires are unchanged.")),
}  # fmt: skip


@dataclass(frozen=True)
class DispatchRow:
    """One dispatch of a schedule as the page shows it."""

    fire: Fire
    dispatch: Dispatch
    record_url: str | None


@admin.register(Schedule)
class ScheduleAdmin(ScheduleEditing):
    actions = None
    view_action = "view_schedule"

    # -- permissions ------------------------------------------------------------------

    def can_see(self, request: HttpRequest, config: ScheduleConfig) -> bool:
        return self.has_view_permission(request) and permissions.can_reach_queue(
            request.user, config.queue
        )

    def can_operate(self, request: HttpRequest, config: ScheduleConfig) -> bool:
        return self.can_see(request, config) and request.user.has_perm(
            "django_ledger.operate_schedule"
        )

    # -- urls and views ---------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        return [
            self.route("add/", self.form_view, "add"),
            self.route("<path:object_id>/edit/", self.form_view, "edit"),
            self.route("<path:object_id>/delete-stored/", self.remove_view, "remove"),
            self.route("<path:object_id>/do/<str:action>/", self.act, "act"),
            *super().get_urls(),
        ]

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        config = runtime.every_schedule().get(object_id)
        if config is None or not self.can_see(request, config):
            return None
        return Schedule(key=object_id, queue=config.queue)

    def overview(self, request: HttpRequest) -> HttpResponse:
        """List the schedules this user may see: next fire, state, last dispatch, nodes.

        Those of this process's settings, and those any scheduler node publishes that
        the settings lack (another settings module, another release), marked as such.
        """
        state = scheduler.state()
        running = scheduler.running()
        registry = get_dispatch_registry()
        rows = []
        configs = runtime.every_schedule()
        settings = scheduler.schedules(strict=False)
        for key, config in configs.items():
            if not self.can_see(request, config):
                continue
            # A paused or disabled schedule fires nothing: no next fire to show.
            firing = config.enabled and key not in state.paused
            following = config.timing.next_after(state.now_ms // 1000) if firing else None
            rows.append(
                {
                    "key": key,
                    "url": self.change_url(key),
                    "task": config.task,
                    "words": config.timing.describe(),
                    "state": state_text(config.key, config.enabled, state),
                    "active": is_active(config.key, config.enabled, state),
                    "next_utc": utc_of(following),
                    "next_local": local_of(following, config.timing.zone),
                    "nodes": sorted({entry.node for entry in running.get(key, [])}),
                    "known": True,
                    "stored": key not in settings,
                }
            )
        for key, definition in sorted(runtime.stored().definitions.items()):
            if key not in configs and self.has_view_permission(request):
                rows.append(unrun_row(key, definition.entry))
        for key, entries in running.items():
            if key not in configs and self._can_see_running(request, entries[0]):
                rows.append(running_row(key, entries, state))
        counted = _schedule_counts()
        for row in rows:
            last = registry.history(str(row["key"]), limit=1)
            row["last"] = last[0] if last else None
            row["counts"] = counted.get(str(row["key"]), dict(_NO_COUNTS))
        context = {
            "rows": rows,
            "now": instant_text(state.now_ms),
            "add_url": self.url("add") if self.can_edit(request) else None,
            "runtime_off": not ledger_settings.runtime_schedules,
        }
        return self.render(request, "schedule_list.html", gettext("Schedules"), context)

    def _can_see_running(self, request: HttpRequest, entry: Running) -> bool:
        # A queue these settings lack has no GROUPS to grant it: superusers only.
        user = request.user
        return bool(getattr(user, "is_superuser", False)) or permissions.can_reach_queue(
            user, entry.queue
        )

    def detail_view(self, request: HttpRequest, key: str) -> HttpResponse:
        """Show one schedule: settings, state, next fires, last dispatches, actions."""
        config = runtime.every_schedule().get(key)
        if config is None or not self.can_see(request, config):
            return self.not_found(request, key)
        stored = key not in scheduler.schedules(strict=False)
        state = scheduler.state()
        found = scheduler.explain(key, NEXT_FIRES, now=state.now_ms // 1000)
        pause = state.paused.get(key)
        through = state.through.get(key)
        editable = stored and self.can_edit(request)
        context = {
            "key": key,
            "config": config,
            "words": found.words,
            "settings": settings_rows(config),
            "now": instant_text(state.now_ms),
            "state": state_text(config.key, config.enabled, state),
            "paused": pause is not None,
            "pause": pause,
            "paused_at": instant_text(pause.at_ms) if pause else "",
            "through": utc_of(through),
            "pending": [
                (utc_of(epoch), entry.node, instant_text(entry.deadline_ms))
                for epoch, entry in sorted(state.pending.get(key, {}).items())
            ],
            "fires": [(utc_text(utc), local_text(local)) for utc, local in found.rows()],
            # A schedule in UTC gets one column: a second one headed "UTC" says nothing.
            "in_utc": config.timing.zone.key in _UTC_ZONES,
            "dispatches": self._dispatches(request, config),
            "can_operate": self.can_operate(request, config),
            "urls": {action: self.url("act", quote(key), action) for action in _ACTIONS},
            "stored": stored,
            "done": config.at is not None and state.through.get(key, 0) >= config.at,
            "edit_url": self.url("edit", quote(key)) if editable else None,
            "delete_url": self.url("remove", quote(key)) if editable else None,
        }
        title = gettext("Schedule %(key)s") % {"key": key}
        return self.render(request, "schedule_detail.html", title, context)

    def act(self, request: HttpRequest, object_id: str, action: str) -> HttpResponse:
        """GET: confirm pausing, resuming or firing now; POST: do it."""
        key = unquote(object_id)
        config = runtime.every_schedule().get(key)
        if action not in _ACTIONS or config is None:
            raise Http404("no such schedule action")
        if not self.can_operate(request, config):
            raise PermissionDenied
        key = config.key
        label, done, effect = _ACTIONS[action]
        if request.method == "POST":
            user = request.user.get_username()
            if action == "pause":
                scheduler.pause(key, user)
                text = gettext("Paused schedule %(key)s.") % {"key": key}
            elif action == "resume":
                was = scheduler.resume(key)
                text = (
                    gettext("Resumed schedule %(key)s.")
                    if was
                    else gettext("Schedule %(key)s was not paused.")
                ) % {"key": key}
            else:
                fire, status = scheduler.trigger(key, user)
                text = gettext("Fired schedule %(key)s now: %(request_id)s %(status)s.") % {
                    "key": key,
                    "request_id": fire.request_id,
                    "status": status,
                }
            self.log_change(request, Schedule(key=key, queue=config.queue), str(done) + " schedule")
            self.message_user(request, text, messages.SUCCESS)
            return HttpResponseRedirect(self.change_url(key))
        title = gettext("%(label)s schedule %(key)s: are you sure?") % {"label": label, "key": key}
        context = {"key": key, "label": label, "effect": effect, "cancel_url": self.change_url(key)}
        return self.render(request, "confirm_schedule.html", title, context)

    # -- reading ----------------------------------------------------------------------

    def _dispatches(self, request: HttpRequest, config: ScheduleConfig) -> list[DispatchRow]:
        registry = get_dispatch_registry()
        found = [
            (Fire(config.key, _epoch(d.fire_time)), d)
            for d in registry.history(config.key, limit=HISTORY)
        ]
        found += [
            (Fire(config.key, _epoch(d.fire_time), manual=True), d)
            for d in registry.history(scheduler.manual_key(config.key), limit=HISTORY)
        ]
        found.sort(key=lambda pair: (pair[1].dispatched_at, pair[0].epoch), reverse=True)
        linkable = permissions.can(request.user, "view", config.queue)
        site = self.admin_site.name
        return [
            DispatchRow(
                fire,
                dispatch,
                record_url(config.queue, fire.request_id, site) if linkable else None,
            )
            for fire, dispatch in found[:HISTORY]
        ]


_NO_COUNTS: Final = {"fired": 0, "skipped": 0, "misfired": 0}


def _schedule_counts() -> dict[str, dict[str, int]]:
    """Each schedule's fires, skips and misfires over the last hour (the tick's counts)."""
    schedule_store = scheduler.store()
    return Counters(schedule_store.redis, schedule_store.namespace).schedule_counts("hour")


def _epoch(moment: datetime) -> int:
    return int(moment.timestamp())
