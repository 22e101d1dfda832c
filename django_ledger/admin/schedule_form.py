"""The admin's form for a stored schedule: add, edit (compare-and-set), delete.

A schedule of ``LEDGER['SCHEDULES']`` has no form: it changes by a deploy. A stored one
is saved by ``django_ledger.services.runtime_schedules``, which validates it by the
rules of the system checks; each refusal is shown under its field, and nothing is
saved. The form carries the version it was read at, so of two admins editing one
schedule the second is told that the first saved. Each save, and each deletion, is in
the admin's history (``LogEntry``) and the scheduler's log, with who and what.
"""

from __future__ import annotations

import json
from typing import Any, Final

from django import forms
from django.utils.translation import gettext, gettext_lazy

from ..core.schedule import Misfire
from ..services import runtime_schedules as runtime

__all__ = ["ScheduleForm", "entry_of_form", "initial_of"]

#: Fields shown as JSON text (and any field of the schedules' settings this form does not
#: know by name, so a new one is editable as JSON without a new form).
_JSON: Final = ("ARGS", "KWARGS")


class ScheduleForm(forms.Form):
    """One stored schedule; ``key`` only when adding."""

    key = forms.CharField(label=gettext_lazy("Key"), max_length=100)
    task = forms.CharField(
        label=gettext_lazy("Task"), max_length=500, help_text=gettext_lazy("Its dotted path.")
    )
    cron = forms.CharField(
        label=gettext_lazy("Cron"),
        required=False,
        max_length=200,
        help_text=gettext_lazy("e.g. 0 3 * * * (give one of cron, every and at)"),
    )
    every = forms.IntegerField(
        label=gettext_lazy("Every (seconds)"), required=False, min_value=-(10**12), max_value=10**12
    )
    at = forms.CharField(
        label=gettext_lazy("At (once)"),
        required=False,
        max_length=64,
        help_text=gettext_lazy("ISO 8601, e.g. 2030-01-31T09:00:00, read in the time zone."),
    )
    timezone = forms.CharField(label=gettext_lazy("Time zone"), required=False, max_length=100)
    args = forms.CharField(
        label=gettext_lazy("Arguments (JSON list)"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
    )
    kwargs = forms.CharField(
        label=gettext_lazy("Keyword arguments (JSON object)"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
    )
    queue = forms.CharField(label=gettext_lazy("Queue"), required=False, max_length=100)
    priority = forms.IntegerField(
        label=gettext_lazy("Priority"), required=False, min_value=-(10**9), max_value=10**9
    )
    misfire = forms.ChoiceField(
        label=gettext_lazy("Misfire"),
        required=False,
        choices=[("", "---------")] + [(m.value, m.value) for m in Misfire],
    )
    grace = forms.IntegerField(
        label=gettext_lazy("Grace (seconds)"), required=False, min_value=-(10**12), max_value=10**12
    )
    enabled = forms.BooleanField(label=gettext_lazy("Enabled"), required=False, initial=True)
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args: Any, adding: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not adding:
            del self.fields["key"]
        known = {name.lower() for name in runtime.FIELDS} | {"key", "version"}
        for name in sorted(known - set(self.fields)):  # a field the settings gained
            self.fields[name] = forms.CharField(
                label=name.upper(), required=False, help_text=gettext_lazy("JSON")
            )
        self.extra_json = [n.upper() for n in self.fields if n.upper() not in _KNOWN]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in (*_JSON, *self.extra_json):
            text = (data.get(name.lower()) or "").strip()
            if not text:
                data[name.lower()] = None
                continue
            try:
                data[name.lower()] = json.loads(text)
            except ValueError as exc:
                self.add_error(name.lower(), gettext("Not JSON: %(error)s") % {"error": exc})
        return data

    def refuse(self, exc: runtime.ScheduleInvalid) -> None:
        """Show the service's refusal under each field it names."""
        for name, words in exc.errors.items():
            field = name.lower() if name.lower() in self.fields else None
            for word in words:
                self.add_error(field, word)


#: The fields the form knows by name, as the settings spell them.
_KNOWN: Final = frozenset(name.upper() for name in ScheduleForm.base_fields)


def entry_of_form(form: ScheduleForm) -> dict[str, Any]:
    """The stored fields of a valid form (absent ones left to the defaults)."""
    data = form.cleaned_data
    entry: dict[str, Any] = {}
    for name in runtime.FIELDS:
        value = data.get(name.lower())
        if name == "ENABLED":
            entry[name] = bool(value)
        elif value not in (None, ""):
            entry[name] = value
    return entry


def initial_of(entry: dict[str, Any], version: int | None) -> dict[str, Any]:
    """The form's initial values for a stored schedule's fields."""
    initial: dict[str, Any] = {"version": version, "enabled": entry.get("ENABLED", True)}
    for name, value in entry.items():
        if name == "ENABLED":
            continue
        shown_as_json = name in _JSON or name not in _KNOWN
        initial[name.lower()] = json.dumps(value) if shown_as_json else value
    return initial
