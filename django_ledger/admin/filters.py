"""List filters of the records changelist: queue, state, and time ranges in epoch ms."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.http import HttpRequest
from django.utils.translation import gettext, gettext_lazy
from rangefilter.filters import DateTimeRangeFilter

from .. import permissions
from ..core.records import State
from .lookups import to_ms

__all__ = ["ChoiceFilter", "QueueFilter", "ScoreRangeFilter", "StateFilter"]


class ChoiceFilter(admin.SimpleListFilter):
    """A list filter whose value must be one of its choices: any other is an incorrect lookup."""

    def refusal(self, value: str) -> str:
        """Why ``value`` is not one of the choices."""
        raise NotImplementedError

    def narrow(self, queryset: Any, value: str) -> Any:
        """The rows of ``queryset`` that the choice ``value`` selects."""
        return queryset.filter(**{str(self.parameter_name): value})

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        value = self.value()
        if value is None:
            return queryset
        if value not in {choice for choice, _ in self.lookup_choices}:
            raise IncorrectLookupParameters(self.refusal(value))
        return self.narrow(queryset, value)


class QueueFilter(ChoiceFilter):
    """The queues the user may view; any other value is an incorrect lookup."""

    title = gettext_lazy("queue")
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            (name, name)
            for name in permissions.allowed_queues(request.user, model_admin.view_action)
        ]

    def refusal(self, value: str) -> str:
        # Not configured, or not this user's: no URL edit reaches another queue.
        return gettext("no queue %(queue)r to show") % {"queue": value}


class StateFilter(ChoiceFilter):
    """A record state: selects the index the list is read from."""

    title = gettext_lazy("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(state.value, state.value) for state in State]

    def refusal(self, value: str) -> str:
        return gettext("%(value)r is not a record state") % {"value": value}


class ScoreRangeFilter(DateTimeRangeFilter):  # type: ignore[misc]
    """django-admin-rangefilter's date-time range, sent to the query in epoch ms.

    A time left empty is the whole day (from 00:00, to 23:59:59.999). A value that
    does not parse is an incorrect lookup, which the admin answers with its normal
    error page, rather than being silently ignored.
    """

    def get_form(self, request: HttpRequest) -> Any:
        for bound, whole_day in (
            (self.lookup_kwarg_gte, "00:00:00"),
            (self.lookup_kwarg_lte, "23:59:59.999"),
        ):
            date, time = f"{bound}_0", f"{bound}_1"
            if _last(self.used_parameters.get(date)) and not _last(self.used_parameters.get(time)):
                self.used_parameters[time] = whole_day
        return super().get_form(request)

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        if not self.form.is_bound:
            return queryset
        if not self.form.is_valid():
            errors = "; ".join(
                str(error) for errors in self.form.errors.values() for error in errors
            )
            raise IncorrectLookupParameters(f"{self.title}: {errors}")
        bounds = self._make_query_filter(request, dict(self.form.cleaned_data))
        if not bounds:
            return queryset
        return queryset.filter(**{lookup: to_ms(value) for lookup, value in bounds.items()})


def _last(value: Any) -> Any:
    return value[-1] if isinstance(value, list) and value else value
