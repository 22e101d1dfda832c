"""A workflow's page: its steps in order, with their states, results and errors.

Read from Redis (``core/flows.py``) on each view (a step's own record page has the
retry and fail actions). ``view_record`` on the workflow's queue shows it; each step
links to its record page. "Cancel workflow" (``operate`` on the queue) asks first, then
runs ``cancel_workflow`` and writes the queue's history. Mounted by ``workflow_urls``
(the records' admin adds them to its URLs), at ``workflow/<queue>/<workflow id>/``,
``workflow-cancel/<queue>/<workflow id>/`` and the list's ``workflows/<queue>/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.contrib import messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext, ngettext

from .. import permissions
from ..conf import get_ledger, ledger_settings
from ..core.errors import LedgerError
from ..core.flows import cancel_workflow, read_workflow, workflow_of_step
from ..models import Queue
from ..tasks.workflow_state import WorkflowStep, state_of
from .base import LedgerModelAdmin, record_url
from .workflow_list import workflow_list_url, workflow_list_view

__all__ = [
    "StepRow",
    "cancel_view",
    "step_workflow_url",
    "workflow_url",
    "workflow_urls",
    "workflow_view",
]

#: Characters of a return value the page shows before it cuts.
VALUE_PREVIEW = 2000
#: Steps one page shows (``?page=2`` the next); the totals cover every step.
STEPS_PER_PAGE = 100
#: Parents a step's row names before it says how many more.
PARENTS_SHOWN = 10


@dataclass(frozen=True)
class StepRow:
    """One step as the page shows it."""

    step: WorkflowStep
    record_url: str
    parents: str
    value: str
    value_cut: bool


def workflow_url(queue: str, workflow_id: str) -> str:
    """The admin page of workflow ``workflow_id`` of ``queue``."""
    return reverse("admin:django_ledger_workflow", args=(queue, quote(workflow_id)))


def step_workflow_url(queue: str, request_id: str) -> str:
    """The page of the workflow whose step ``request_id`` is ('' for no workflow's step).

    For a record's page: one ``HGET``; a Redis error answers '' (the page still shows).
    """
    try:
        workflow_id = workflow_of_step(get_ledger(queue).shard_for(request_id), request_id)
    except LedgerError:
        return ""
    return "" if workflow_id is None else workflow_url(queue, workflow_id)


def workflow_view(
    model_admin: LedgerModelAdmin, request: HttpRequest, queue: str, workflow_id: str
) -> HttpResponse:
    """Show one workflow's steps, in the order they were given."""
    workflow_id = unquote(workflow_id)
    if queue not in ledger_settings.queue_names or not permissions.can(request.user, "view", queue):
        raise Http404(gettext("No such workflow"))
    raw_page = request.GET.get("page", "1")
    page = int(raw_page) if raw_page.isascii() and raw_page.isdigit() and len(raw_page) < 9 else 0
    if page < 1:
        raise Http404(gettext("No such page"))
    ledger = get_ledger(queue)
    try:
        status = read_workflow(
            ledger, workflow_id, offset=(page - 1) * STEPS_PER_PAGE, limit=STEPS_PER_PAGE
        )
    except (LedgerError, TypeError) as exc:  # Redis away, or a sharded queue
        raise Http404(gettext("The workflow cannot be read: %(reason)s") % {"reason": exc}) from exc
    if status is None:
        raise Http404(gettext("No such workflow"))
    if page > 1 and not status.steps:
        raise Http404(gettext("No such page"))
    state = state_of(status)
    rows = [_row(queue, step) for step in state.steps]
    pages = max(1, -(-state.total // STEPS_PER_PAGE))
    context: dict[str, Any] = {
        "queue": queue,
        "workflow": state,
        "rows": rows,
        "counts": sorted(state.counts.items()),
        "page": page,
        "pages": pages,
        "first_row": state.offset + 1,
        "last_row": state.offset + len(rows),
        "previous_page": page - 1 if page > 1 else None,
        "next_page": page + 1 if page < pages else None,
        "list_url": workflow_list_url(queue),
        "cancel_url": reverse(
            "admin:django_ledger_workflow_cancel", args=(queue, quote(workflow_id))
        )
        if permissions.can(request.user, "operate", queue)
        and not state.finished
        and not state.cancelled
        else "",
    }
    title = gettext("Workflow %(workflow_id)s") % {"workflow_id": workflow_id}
    return model_admin.render(request, "workflow_detail.html", title, context)


def _row(queue: str, step: WorkflowStep) -> StepRow:
    value, cut = "", False
    if step.state == "COMPLETED":
        value = json.dumps(step.return_value, ensure_ascii=False)
        cut = len(value) > VALUE_PREVIEW
        value = value[:VALUE_PREVIEW]
    url = "" if step.state in ("WAITING", "GONE") else record_url(queue, step.task_id)
    parents = ", ".join(step.parents[:PARENTS_SHOWN])
    if len(step.parents) > PARENTS_SHOWN:
        parents += f" and {len(step.parents) - PARENTS_SHOWN:,} more"
    return StepRow(step, url, parents, value, cut)


def cancel_view(
    model_admin: LedgerModelAdmin, request: HttpRequest, queue: str, workflow_id: str
) -> HttpResponse:
    """GET: ask before cancelling a workflow; POST: cancel it and say how many steps."""
    workflow_id = unquote(workflow_id)
    if queue not in ledger_settings.queue_names or not permissions.can(request.user, "view", queue):
        raise Http404(gettext("No such workflow"))
    if not permissions.can(request.user, "operate", queue):
        raise PermissionDenied
    ledger = get_ledger(queue)
    back = workflow_url(queue, workflow_id)
    try:
        if request.method == "POST":
            cancelled = cancel_workflow(ledger, workflow_id)
        else:
            status = read_workflow(ledger, workflow_id, limit=0)
            cancelled = None if status is None else status.total
    except (LedgerError, TypeError) as exc:
        raise Http404(gettext("The workflow cannot be read: %(reason)s") % {"reason": exc}) from exc
    if cancelled is None:
        raise Http404(gettext("No such workflow"))
    if request.method == "POST":
        done = ngettext(
            "Cancelled workflow %(workflow_id)s: %(count)d step not yet started was cancelled.",
            "Cancelled workflow %(workflow_id)s: %(count)d steps not yet started were cancelled.",
            cancelled,
        ) % {"workflow_id": workflow_id, "count": cancelled}
        queue_admin = model_admin.admin_site.get_model_admin(Queue)
        queue_admin.log_change(request, Queue(key=queue, queue=queue), done)
        queue_admin.message_user(request, done, messages.SUCCESS)
        return HttpResponseRedirect(back)
    title = gettext("Cancel workflow %(workflow_id)s: are you sure?") % {"workflow_id": workflow_id}
    context = {"queue": queue, "workflow_id": workflow_id, "cancel_url": back}
    return model_admin.render(request, "confirm_workflow_cancel.html", title, context)


def workflow_urls(model_admin: LedgerModelAdmin) -> list[URLPattern]:
    """The pages' URLs, each view behind the admin's login, its pages on ``model_admin``'s."""
    return [
        path(
            pattern,
            model_admin.admin_site.admin_view(partial(view, model_admin)),
            name=f"django_ledger_{name}",
        )
        for pattern, view, name in (
            ("workflows/<str:queue>/", workflow_list_view, "workflows"),
            ("workflow-cancel/<str:queue>/<path:workflow_id>/", cancel_view, "workflow_cancel"),
            ("workflow/<str:queue>/<path:workflow_id>/", workflow_view, "workflow"),
        )
    ]
