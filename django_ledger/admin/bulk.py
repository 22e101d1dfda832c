"""Act on everything the records list's filter matches: a preview, then a run in pages.

The records list links to ``bulk/`` with its own query string. The preview page reads
that filter through the list itself (the queue, state and time filters build the same
query the list shows) and counts what the action would take; confirming starts a run
(``services/bulk.py``) and runs its first pages. The run's page shows its progress and,
while it goes on, posts itself back every time it has rendered (``bulk.js``; a button
without JavaScript), each post running about two more seconds of pages. Closing the page
pauses the run: it resumes from the runs list, the API or ``manage.py ledger_records``.
"""

from __future__ import annotations

from functools import partial

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.urls import URLPattern
from django.utils.translation import gettext, gettext_lazy

from .. import permissions
from ..core.bulk import ACTIONS
from ..core.records import ms_to_datetime
from ..services.bulk import BulkBusy, BulkRun, load_run, preview, recent_runs, start_run, step_run
from ..services.bulk_filter import PERMISSION, BulkFilter, BulkRefused, parse_filter
from .actions import ActionsAdmin
from .lookups import ALL_STATES

__all__ = ["LABELS", "bulk_links", "bulk_urls", "read_filter"]

#: Seconds of pages one post of the run's page runs.
STEP_SECONDS = 2.0
LABELS = {
    "retry": gettext_lazy("Retry now"),
    "fail": gettext_lazy("Mark failed"),
    "purge": gettext_lazy("Purge"),
    "cancel": gettext_lazy("Cancel"),
}
_WARNINGS = {
    "retry": gettext_lazy(
        "Each record goes back to PENDING, due now, its attempts counted afresh."
    ),
    "fail": gettext_lazy("Each record ends as FAILED and never runs."),
    "purge": gettext_lazy("Each record is deleted now, before its retention ends."),
    "cancel": gettext_lazy(
        "Each record ends FAILED as cancelled; a running one's settlement and fenced "
        "effects are refused."
    ),
}
#: The list's parameters a filter is read from (everything else is dropped).
_TIME_PREFIXES = ("due_at__range", "lease_until__range", "updated_at__range")


def bulk_urls(model_admin: ActionsAdmin) -> list[URLPattern]:
    return [
        model_admin.route("bulk/", partial(bulk_view, model_admin), "bulk"),
        model_admin.route(
            "bulk/<str:queue>/<str:run_id>/", partial(run_view, model_admin), "bulk_run"
        ),
    ]


def _filter_params(query: QueryDict) -> QueryDict:
    """The records list's filter parameters of ``query`` (its page, order and search go)."""
    kept = QueryDict(mutable=True)
    for key in query:
        if key in ("queue", "state", "task") or key.startswith(_TIME_PREFIXES):
            kept.setlist(key, query.getlist(key))
    return kept


def read_filter(
    model_admin: ActionsAdmin, request: HttpRequest, action: str, query: QueryDict
) -> BulkFilter:
    """The list's filter (``query``) as a bulk filter (``BulkRefused`` when it cannot be one)."""
    if action not in ACTIONS:
        raise Http404("no such bulk action")
    params = query.copy()
    task = params.pop("task", [""])[-1]
    # The list's own filters read the rest, as they do for the list (its errors too).
    listing = QueryDict(params.urlencode())  # immutable, as a request's own
    original = request.GET
    request.GET = listing
    try:
        spec = model_admin.get_changelist_instance(request).queryset.spec
    except Exception as exc:  # IncorrectLookupParameters and kin: the list says why
        raise BulkRefused(str(exc) or gettext("the list cannot show that filter")) from exc
    finally:
        request.GET = original
    if len(spec.queues) != 1:
        raise BulkRefused(gettext("filter the list by one queue first"))
    states = None if set(spec.states) == set(ALL_STATES) else [s.value for s in spec.states]
    if states == []:
        raise BulkRefused(gettext("the filter selects no state"))
    return parse_filter(
        spec.queues[0],
        action,
        may=lambda permission, queue: permissions.can(request.user, permission, queue),
        states=states,
        task=task or None,
        bounds=dict(spec.bounds),
    )


def bulk_view(model_admin: ActionsAdmin, request: HttpRequest) -> HttpResponse:
    """GET: the preview of ``?action=`` on the list's filter; POST: start the run."""
    source = request.GET if request.method == "GET" else request.POST
    action = source.get("action", "")
    changelist = model_admin.changelist_url()
    posted = QueryDict(request.POST.get("filter", ""))
    query = _filter_params(request.GET if request.method == "GET" else posted)
    back = f"{changelist}?{query.urlencode()}" if query else changelist
    try:
        spec = read_filter(model_admin, request, action, query)
    except BulkRefused as exc:
        model_admin.message_user(
            request,
            gettext("%(label)s: %(reason)s") % {"label": LABELS.get(action, action), "reason": exc},
            messages.ERROR,
        )
        return HttpResponseRedirect(back)
    if request.method == "POST":
        by = str(request.user.get_username())
        try:
            run = start_run(
                spec, by=by, user_id=request.user.pk, reason=request.POST.get("reason", "")
            )
            run = step_run(spec.queue, run.id, seconds=STEP_SECONDS)
        except BulkRefused as exc:
            model_admin.message_user(request, str(exc), messages.ERROR)
            return HttpResponseRedirect(back)
        return HttpResponseRedirect(_run_url(model_admin, run))
    title = gettext("%(label)s: every record the filter matches") % {"label": LABELS[action]}
    context = {
        "spec": spec,
        "states": ", ".join(s.value for s in spec.states),
        "bounds": _bounds_text(spec),
        "count": preview(spec),
        "label": LABELS[action],
        "warning": _WARNINGS[action],
        "filter": query.urlencode(),
        "action": action,
        "form_url": model_admin.url("bulk"),
        "cancel_url": back,
        "runs": [(run, _run_url(model_admin, run)) for run in recent_runs(spec.queue, 5)],
    }
    return model_admin.render(request, "bulk_preview.html", title, context)


def run_view(
    model_admin: ActionsAdmin, request: HttpRequest, queue: str, run_id: str
) -> HttpResponse:
    """GET: a run's progress; POST: run more of its pages, then show it again."""
    if not permissions.can(request.user, "view", queue):
        raise Http404("no such run")
    try:
        run = load_run(queue, run_id)
    except BulkRefused as exc:
        raise Http404(str(exc)) from exc
    if not permissions.can(request.user, PERMISSION[run.filter.action], queue):
        raise PermissionDenied
    if request.method == "POST":
        try:
            run = step_run(queue, run.id, seconds=STEP_SECONDS)
        except BulkBusy as exc:
            model_admin.message_user(request, str(exc), messages.WARNING)
        if run.finished:
            model_admin.message_user(
                request,
                gettext("%(label)s: %(done)d done, %(skipped)d skipped (moved on meanwhile).")
                % {"label": LABELS[run.filter.action], "done": run.done, "skipped": run.skipped},
                messages.SUCCESS,
            )
        return HttpResponseRedirect(_run_url(model_admin, run))
    title = gettext("%(label)s: run %(run)s") % {"label": LABELS[run.filter.action], "run": run.id}
    context = {
        "run": run,
        "states": ", ".join(s.value for s in run.filter.states),
        "bounds": _bounds_text(run.filter),
        "total": max(run.matched, run.seen),
        "step_url": _run_url(model_admin, run),
    }
    return model_admin.render(request, "bulk_run.html", title, context)


def _run_url(model_admin: ActionsAdmin, run: BulkRun) -> str:
    return model_admin.url("bulk_run", run.filter.queue, run.id)


def _bounds_text(spec: BulkFilter) -> str:
    parts = []
    for name, (low, high) in sorted(spec.bounds.items()):
        low_text = "…" if low is None else ms_to_datetime(low).isoformat()
        high_text = "…" if high is None else ms_to_datetime(high).isoformat()
        parts.append(f"{name}: {low_text} to {high_text}")
    return "; ".join(parts)


def bulk_links(model_admin: ActionsAdmin, request: HttpRequest) -> list[tuple[str, str]]:
    """The list's links to the preview of each action this user may take on its filter."""
    url = model_admin.url("bulk")
    query = _filter_params(request.GET)
    out = []
    for action in ACTIONS:
        if permissions.can(request.user, PERMISSION[action]):
            params = query.copy()
            params["action"] = action
            out.append((str(LABELS[action]), f"{url}?{params.urlencode()}"))
    return out
