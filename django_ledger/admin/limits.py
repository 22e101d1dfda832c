"""A queue's flow limits on its health page: each limit, its use now, and a change.

The limits live in Redis (the settings are their default); a change here holds for every
worker from its next claim, with no restart, needs the ``limit_queue`` permission, and is
written to the queue's admin history and to the ``django_ledger.limits`` log.
docs/limits.md describes the model.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy

from .. import permissions
from ..conf import get_ledger, ledger_settings
from ..core.limits import LimitUse
from ..models import Queue
from ..services.limits import KEEP, LimitChange, change_limits, describe, parse_rate
from .display import Label

__all__ = ["LimitsForm", "change_view", "limits_context"]


class LimitsForm(forms.Form):
    """A change of a queue's limits: a field left empty keeps what is stored."""

    rate = forms.CharField(
        required=False,
        max_length=40,
        label=gettext_lazy("Rate"),
        help_text=gettext_lazy("LIMIT/PERIOD[/BURST], PERIOD in seconds"),
    )
    no_rate = forms.BooleanField(required=False, label=gettext_lazy("Remove the rate"))
    concurrency = forms.IntegerField(
        required=False, min_value=1, max_value=1_000_000_000, label=gettext_lazy("Concurrency")
    )
    no_concurrency = forms.BooleanField(
        required=False, label=gettext_lazy("Remove the concurrency")
    )
    reset = forms.BooleanField(
        required=False, label=gettext_lazy("Put the settings' limits back first")
    )

    def clean_rate(self) -> Any:
        text = self.cleaned_data["rate"].strip()
        if not text:
            return KEEP
        try:
            return parse_rate(text)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def change(self) -> LimitChange:
        data = self.cleaned_data
        if data["rate"] != KEEP and data["no_rate"]:
            raise forms.ValidationError(gettext("Give a rate or remove it, not both."))
        if data["concurrency"] is not None and data["no_concurrency"]:
            raise forms.ValidationError(gettext("Give a concurrency or remove it, not both."))
        rate = None if data["no_rate"] else data["rate"]
        concurrency: Any = KEEP
        if data["no_concurrency"]:
            concurrency = None
        elif data["concurrency"] is not None:
            concurrency = data["concurrency"]
        return LimitChange(rate, concurrency, data["reset"])


def limits_context(request: HttpRequest, queue: str) -> dict[str, Any]:
    """The health page's limits part (``_limits.html``): one script call."""
    ledger = get_ledger(queue)
    use = ledger.limits()
    return {
        "limits": use,
        "limits_rows": _rows(use),
        "limits_text": describe(use.limits),
        "limits_settings": describe(ledger_settings.queue(queue).limits),
        "limits_sharded": len(ledger.shards) > 1,
        "can_limit": permissions.can(request.user, "limit", queue),
        "limits_form": LimitsForm(),
        "limits_url": reverse("admin:django_ledger_queue_limits", args=(quote(queue),)),
    }


def _rows(use: LimitUse) -> list[tuple[Label, str]]:
    limits = use.limits
    per_key = limits.key is not None
    none = gettext("none")
    rows = [
        (
            Label.of(gettext_lazy("Rate per key")) if per_key else Label.of(gettext_lazy("Rate")),
            str(limits.rate) if limits.rate else none,
        ),
        (
            Label.of(gettext_lazy("Concurrency per key"))
            if per_key
            else Label.of(gettext_lazy("Concurrency")),
            str(limits.concurrency or none),
        ),
    ]
    if limits.key is not None:
        rows.append((Label.of(gettext_lazy("Key")), limits.key))
        rows.append(
            (Label.of(gettext_lazy("Keys with due records in turn")), str(use.keys_waiting))
        )
    elif limits.rate is not None and use.tokens_left is not None:
        tokens = gettext("%(left)s of %(burst)s") % {
            "left": f"{use.tokens_left:g}",
            "burst": limits.rate.burst,
        }
        rows.append((Label.of(gettext_lazy("Tokens left")), tokens))
    taken = str(use.slots_taken)
    if limits.concurrency is not None and limits.key is None:
        taken = gettext("%(left)s of %(burst)s") % {"left": taken, "burst": limits.concurrency}
    rows.append((Label.of(gettext_lazy("Slots taken (records claimed)")), taken))
    rows.append((Label.of(gettext_lazy("Due now")), str(use.due_now)))
    rows.append((Label.of(gettext_lazy("Due records held by the limits")), str(use.held)))
    rows.append((Label.of(gettext_lazy("Set by")), use.source or Label.of(gettext_lazy("nobody"))))
    return rows


def change_view(model_admin: Any, request: HttpRequest, object_id: str) -> HttpResponse:
    """POST: change the queue's limits (permission ``limit_queue``); back to its page."""
    queue = unquote(object_id)
    # A queue the user may not see answers as one that does not exist (as the API does).
    if queue not in ledger_settings.queues or not permissions.can_reach_queue(request.user, queue):
        raise Http404(gettext("no such queue"))
    if not model_admin.can_view_queue(request, queue) or not permissions.can(
        request.user, "limit", queue
    ):
        raise PermissionDenied
    back = HttpResponseRedirect(model_admin.change_url(queue))
    if request.method != "POST":
        return back
    form = LimitsForm(request.POST)
    try:
        if not form.is_valid():
            raise forms.ValidationError(
                "; ".join(
                    f"{name}: {' '.join(str(e) for e in errs)}"
                    for name, errs in form.errors.items()
                )
            )
        change = form.change()
        if not change.changes:
            model_admin.message_user(request, gettext("Nothing to change."), messages.INFO)
            return back
        use = change_limits(queue, change, actor=f"admin user {request.user.get_username()}")
    except (forms.ValidationError, ValueError) as exc:
        text = (
            " ".join(map(str, exc.messages)) if isinstance(exc, forms.ValidationError) else str(exc)
        )
        model_admin.message_user(
            request,
            gettext("The limits did not change: %(reason)s") % {"reason": text},
            messages.ERROR,
        )
        return back
    limits = describe(use.limits)
    model_admin.log_change(
        request, Queue(key=queue, queue=queue), f"Set the flow limits to {limits}"
    )
    done = gettext("Set the flow limits to %(limits)s on queue %(queue)s.")
    model_admin.message_user(request, done % {"limits": limits, "queue": queue}, messages.SUCCESS)
    return back
