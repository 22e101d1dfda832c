"""Who may do what to which queue and dispatch key: shared by the admin and the API.

Actions map to model permissions of this app (``django_ledger.<codename>``). A queue
may further be limited to some groups with ``LEDGER['QUEUES'][name]['GROUPS']``;
superusers reach every queue. Dispatch keys follow the same model:
``LEDGER['DISPATCH']['GROUPS']`` limits the keys a prefix starts to some groups, and a
key that no prefix starts belongs to no tenant, so only a user who reaches every queue
may use it (in a project without queue groups, every permitted user).
"""

from __future__ import annotations

from typing import Any

from .conf import ledger_settings

__all__ = ["ACTIONS", "allowed_queues", "can", "can_reach_dispatch_key", "can_reach_queue"]

#: action -> permission codename (app label ``django_ledger``).
ACTIONS = {
    "view": "view_record",
    "admit": "admit_record",
    "claim": "claim_record",
    "retry": "retry_record",
    "fail": "fail_record",
    "purge": "purge_record",
    "view_quarantine": "view_quarantinedrecord",
    "discard": "discard_quarantinedrecord",
    "restore": "restore_quarantinedrecord",
    "view_queue": "view_queue",
    "operate": "operate_queue",
    "limit": "limit_queue",
    "view_schedule": "view_schedule",
    "operate_schedule": "operate_schedule",
    "edit_schedule": "edit_schedule",
}


def can_reach_queue(user: Any, queue: str) -> bool:
    """Return whether ``user`` may see ``queue`` at all (configured, and in its groups)."""
    queues = ledger_settings.queues
    if queue not in queues or not getattr(user, "is_authenticated", False):
        return False
    if getattr(user, "is_superuser", False):
        return True
    groups = queues[queue].get("GROUPS")
    if not groups:
        return True
    return bool(user.groups.filter(name__in=list(groups)).exists())


def can_reach_dispatch_key(user: Any, key: str) -> bool:
    """Return whether ``user`` may log, claim, find or check the dispatches of ``key``.

    The longest prefix in ``LEDGER['DISPATCH']['GROUPS']`` that starts ``key`` names
    the groups it belongs to (an empty list: every user); a key no prefix starts is
    reachable only by a user who reaches every configured queue.
    """
    if not getattr(user, "is_authenticated", False):
        return False
    if getattr(user, "is_superuser", False):
        return True
    for prefix, groups in ledger_settings.dispatch_settings.groups:
        if key.startswith(prefix):
            return not groups or bool(user.groups.filter(name__in=list(groups)).exists())
    return all(can_reach_queue(user, queue) for queue in ledger_settings.queue_names)


def can(user: Any, action: str, queue: str | None = None) -> bool:
    """Return whether ``user`` may do ``action`` (on ``queue``, when given)."""
    codename = ACTIONS[action]
    if not getattr(user, "is_active", False) or not user.has_perm(f"django_ledger.{codename}"):
        return False
    return queue is None or can_reach_queue(user, queue)


def allowed_queues(user: Any, action: str = "view") -> list[str]:
    """Return the configured queues on which ``user`` may do ``action``."""
    return [queue for queue in ledger_settings.queue_names if can(user, action, queue)]
