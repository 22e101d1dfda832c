"""The admin's views over stored schedules: add, edit and delete (``edit_schedule``).

The base of ``ScheduleAdmin``: each view goes through ``guard`` and ``admin_view``, needs
``view_schedule`` and ``edit_schedule``, and reaching the schedule's queue. The form is
``schedule_form.ScheduleForm``; the service (``runtime_schedules``) validates and saves.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext

from .. import permissions
from ..conf import ledger_settings
from ..models import Schedule
from ..services import runtime_schedules as runtime
from .base import PagesAdmin
from .schedule_form import ScheduleForm, entry_of_form, initial_of

__all__ = ["ScheduleEditing"]


class ScheduleEditing(PagesAdmin):
    """Add, edit and delete stored schedules (``ScheduleAdmin`` builds on it)."""

    def can_edit(self, request: HttpRequest) -> bool:
        user = request.user
        return bool(
            user.is_active
            and user.has_perm("django_ledger.view_schedule")
            and user.has_perm("django_ledger.edit_schedule")
        )

    def _stored_or_none(self, request: HttpRequest, key: str) -> Any:
        found = runtime.stored().definitions.get(key)
        if found is None:
            return None
        queue = runtime.queue_of(key, found.entry)
        if queue is not None and not permissions.can_reach_queue(request.user, queue):
            return None
        return found

    def form_view(self, request: HttpRequest, object_id: str | None = None) -> HttpResponse:
        """Add a stored schedule, or edit the one ``object_id`` names."""
        key = object_id
        if not self.can_edit(request):
            raise PermissionDenied
        stored = None if key is None else self._stored_or_none(request, key)
        if key is not None and stored is None:
            return self.not_found(request, key)
        off = not ledger_settings.runtime_schedules
        if request.method == "POST" and not off:
            form = ScheduleForm(request.POST, adding=key is None)
            if form.is_valid():
                saved: HttpResponse | None = self._save(request, form, key)
                if saved is not None:
                    return saved
        elif stored is not None:
            form = ScheduleForm(initial=initial_of(stored.entry, stored.version), adding=False)
        else:
            form = ScheduleForm(initial={"enabled": True}, adding=True)
        title = (
            gettext("Add a schedule")
            if key is None
            else gettext("Edit schedule %(key)s") % {"key": key}
        )
        context = {
            "form": form,
            "key": key,
            "adding": key is None,
            "off": off,
            "cancel_url": self.changelist_url() if key is None else self.change_url(key),
        }
        return self.render(request, "schedule_form.html", title, context)

    def _save(
        self, request: HttpRequest, form: ScheduleForm, key: str | None
    ) -> HttpResponse | None:
        entry = entry_of_form(form)
        name = form.cleaned_data["key"] if key is None else key
        who = request.user.get_username()
        queue = runtime.queue_of(name, entry)
        if queue is not None and not permissions.can_reach_queue(request.user, queue):
            form.add_error(
                "queue", gettext("You may not reach queue %(queue)r.") % {"queue": queue}
            )
            return None
        try:
            if key is None:
                found = runtime.create(name, entry, who)
            else:
                found = runtime.edit(key, entry, who, form.cleaned_data.get("version"))
        except runtime.ScheduleInvalid as exc:
            form.refuse(exc)
            return None
        except runtime.VersionConflict as exc:
            form.add_error(
                None,
                gettext(
                    "Another change to this schedule was saved first (it is at version "
                    "%(current)s): reload the page to see it, then edit again."
                )
                % {"current": exc.current},
            )
            return None
        words = (
            gettext("Added schedule (version %(version)s): %(fields)s")
            if key is None
            else gettext("Edited schedule (version %(version)s): %(fields)s")
        )
        change = words % {
            "version": found.version,
            "fields": ", ".join(f"{n}={v!r}" for n, v in sorted(entry.items()))[:400],
        }
        target = Schedule(key=name, queue=queue or "")
        if key is None:
            self.log_addition(request, target, change)
        else:
            self.log_change(request, target, change)
        self.message_user(
            request, gettext("Saved schedule %(key)s.") % {"key": name}, messages.SUCCESS
        )
        return HttpResponseRedirect(self.change_url(name))

    def remove_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Confirm, then delete a stored schedule."""
        key = object_id
        if not self.can_edit(request):
            raise PermissionDenied
        stored = self._stored_or_none(request, key)
        if stored is None:
            return self.not_found(request, key)
        if request.method == "POST":
            try:
                runtime.delete(key, request.user.get_username(), stored.version)
            except (runtime.VersionConflict, runtime.RuntimeSchedulesOff) as exc:
                self.message_user(request, str(exc), messages.ERROR)
                return HttpResponseRedirect(self.change_url(key))
            self.log_deletions(request, [Schedule(key=key, queue="")])  # type: ignore[arg-type]
            self.message_user(
                request, gettext("Deleted schedule %(key)s.") % {"key": key}, messages.SUCCESS
            )
            return HttpResponseRedirect(self.changelist_url())
        context = {
            "key": key,
            "label": gettext("Delete"),
            "effect": gettext(
                "No scheduler admits a fire of it from their next tick; its pause and "
                "pending fires go with it."
            ),
            "cancel_url": self.change_url(key),
        }
        title = gettext("Delete schedule %(key)s: are you sure?") % {"key": key}
        return self.render(request, "confirm_schedule.html", title, context)
