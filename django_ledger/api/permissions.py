"""Who may call what: the same model permissions as the admin (``django_ledger.permissions``).

Each view action names a ledger action (``admit``, ``claim``, ``view``, ``view_queue``,
``view_quarantine``, ``operate``). As with DRF's ``DjangoModelPermissions``: an
anonymous caller gets 401, a caller without the model permission 403, and a queue the
caller may not reach (not configured, or limited to groups the caller is not in)
answers 404, after the permission check so that it reveals no queue names.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from ..permissions import can, can_reach_queue
from .errors import ApiError

__all__ = ["LedgerPermission"]


class LedgerPermission(BasePermission):
    """Admit a call if its user holds the permission of the view's ledger action."""

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False  # DRF answers 401 (not_authenticated)
        action: str | None = getattr(view, "ledger_action", None)
        if action is not None and not can(user, action):
            raise ApiError(
                403,
                "permission_denied",
                gettext("You do not have the permission to %(action)s here.")
                % {"action": action.replace("_", " ")},
                {"action": action},
            )
        queue = getattr(view, "kwargs", {}).get("queue")
        if queue is not None and not can_reach_queue(user, queue):
            raise ApiError(
                404,
                "queue_not_found",
                gettext("There is no queue %(queue)r for you.") % {"queue": queue},
            )
        return True
