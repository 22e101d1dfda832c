"""The Workflows page: a queue's workflows, a page at a time, each linked to its page.

Read with ``core/flow_list.py`` (a cursor over the flows hash, never all workflows at
once); ``view_record`` on the queue shows it, as it does a workflow's page. Mounted by
``workflow_urls`` at ``workflows/<queue>/``; ``?state=`` filters, ``?cursor=`` pages on.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext

from .. import permissions
from ..conf import get_ledger, ledger_settings
from ..core.errors import LedgerError
from ..core.flow_list import WORKFLOW_STATES, list_workflows
from .base import LedgerModelAdmin
from .display import instant_text

__all__ = ["WORKFLOWS_PER_PAGE", "workflow_list_url", "workflow_list_view"]

#: Workflows one page lists (a page may hold a few more: ``list_workflows`` says why).
WORKFLOWS_PER_PAGE = 20
#: The largest cursor Redis answers (an unsigned 64-bit integer).
_MAX_CURSOR = 2**64 - 1


def workflow_list_url(queue: str) -> str:
    """The Workflows page of ``queue``."""
    return reverse("admin:django_ledger_workflows", args=(queue,))


def workflow_list_view(
    model_admin: LedgerModelAdmin, request: HttpRequest, queue: str
) -> HttpResponse:
    """List one page of ``queue``'s workflows: id, state, steps done of total, times."""
    if queue not in ledger_settings.queue_names:
        raise Http404(gettext("No such queue"))
    if not permissions.can(request.user, "view", queue):
        raise PermissionDenied
    state = request.GET.get("state", "")
    if state and state not in WORKFLOW_STATES:
        raise Http404(gettext("No such workflow state"))
    raw_cursor = request.GET.get("cursor", "0")
    if not (raw_cursor.isascii() and raw_cursor.isdigit() and len(raw_cursor) <= 20):
        raise Http404(gettext("No such page"))
    cursor = int(raw_cursor)
    if cursor > _MAX_CURSOR:
        raise Http404(gettext("No such page"))
    try:
        page = list_workflows(
            get_ledger(queue), cursor, limit=WORKFLOWS_PER_PAGE, state=state or None
        )
    except (LedgerError, TypeError) as exc:  # Redis away, or a sharded queue
        raise Http404(
            gettext("The workflows cannot be read: %(reason)s") % {"reason": exc}
        ) from exc
    rows = [
        {
            "summary": summary,
            "url": reverse(
                "admin:django_ledger_workflow", args=(queue, quote(summary.workflow_id))
            ),
            "started": instant_text(summary.started_at),
            "ended": instant_text(summary.ended_at),
        }
        for summary in page.workflows
    ]

    def query(**params: Any) -> str:
        return "?" + urlencode({k: v for k, v in params.items() if v})

    context: dict[str, Any] = {
        "queue": queue,
        "rows": rows,
        "state": state,
        "states": [(name, query(state=name), name == state) for name in WORKFLOW_STATES],
        "all_states": query(),
        "first_url": query(state=state) if cursor else "",
        "next_url": query(state=state, cursor=page.cursor) if page.cursor else "",
        "queue_url": reverse("admin:django_ledger_queue_change", args=(queue,))
        if permissions.can(request.user, "view_queue", queue)
        else "",
    }
    title = gettext("Workflows of queue %(queue)s") % {"queue": queue}
    return model_admin.render(request, "workflow_list.html", title, context)
