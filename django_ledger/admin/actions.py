"""Operator actions: a confirmation page, then a compare-and-set on the bytes it showed.

Each action names the permission it needs (``permissions.can``) and the operation of
``django_ledger.operations`` it runs. The confirmation page reads every record afresh
and carries each one's version; the action runs against that version, so a record
that changed after the page was shown is refused with a message, never overwritten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern
from django.utils.functional import lazy
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext, gettext_lazy, ngettext

from .. import operations, permissions
from ..conf import get_ledger, ledger_settings
from ..core.errors import LedgerError
from ..operations import RecordChanged, Snapshot
from .base import LedgerModelAdmin
from .display import sentence
from .lookups import split_key

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise as StrOrPromise
else:
    StrOrPromise = str

__all__ = [
    "MAX_SELECTED",
    "OPERATIONS",
    "ActionsAdmin",
    "Note",
    "Operation",
    "act_view",
    "bulk_action",
    "confirm",
]

#: Most records one confirmation page acts on.
MAX_SELECTED = 100


def _decodes(snap: Snapshot) -> str | None:
    if snap.record is not None:
        return None
    return gettext("its stored bytes do not decode (%(error)s)") % {"error": snap.error}


def _not_ended(snap: Snapshot) -> str | None:
    if snap.record is None:
        return _decodes(snap)
    if snap.record.state.terminal:
        return gettext("it has already ended as %(state)s") % {"state": snap.record.state.value}
    return None


def _ended(snap: Snapshot) -> str | None:
    if snap.record is None:
        return _decodes(snap)
    if not snap.record.state.terminal:
        return gettext("it is %(state)s: only ended records can be purged") % {
            "state": snap.record.state.value
        }
    return None


def _quarantined(snap: Snapshot) -> str | None:
    return None if snap.quarantined is not None else gettext("it is not quarantined")


def _restorable(snap: Snapshot) -> str | None:
    if snap.quarantined is None:
        return gettext("it is not quarantined")
    if snap.record is None:
        return gettext("its stored bytes still do not decode (%(error)s)") % {"error": snap.error}
    return None


@dataclass(frozen=True)
class Note:
    """What an action says it did to one record, beyond the count (shown as a message)."""

    text: str


@dataclass(frozen=True)
class Operation:
    """One operator action."""

    name: str
    #: The ``permissions.can`` action it needs.
    permission: str
    label: StrOrPromise
    done: StrOrPromise
    #: ``run(ledger, request_id, version)``, and the user name after with ``by_user``.
    run: Callable[..., Any]
    #: Why it does not apply to a snapshot, or ``None`` when it does.
    refusal: Callable[[Snapshot], str | None]
    #: Whether the record (or quarantined id) is gone afterwards.
    removes: bool = False
    #: What the action does, said of one record and of several.
    warning: StrOrPromise = ""
    warning_many: StrOrPromise = ""
    #: Whether ``run`` also takes who acts (their user name), as a cancel names its author.
    by_user: bool = False


OPERATIONS = {
    op.name: op
    for op in (
        Operation(
            "retry",
            "retry",
            gettext_lazy("Retry now"),
            gettext_lazy("Retried now"),
            operations.retry_now,
            _decodes,
            warning=gettext_lazy(
                "The record goes back to PENDING, due now; a worker holding it loses its claim."
            ),
            warning_many=gettext_lazy(
                "The records go back to PENDING, due now; a worker holding one loses its claim."
            ),
        ),
        Operation(
            "fail",
            "fail",
            gettext_lazy("Mark failed"),
            gettext_lazy("Marked FAILED"),
            operations.mark_failed,
            _not_ended,
            warning=gettext_lazy("The record ends as FAILED; a worker holding it loses its claim."),
            warning_many=gettext_lazy(
                "The records end as FAILED; a worker holding one loses its claim."
            ),
        ),
        Operation(
            "purge",
            "purge",
            gettext_lazy("Purge"),
            gettext_lazy("Purged"),
            operations.purge,
            _ended,
            removes=True,
            warning=gettext_lazy(
                "The record is deleted now, before its retention ends; its id can be admitted again."
            ),
            warning_many=gettext_lazy(
                "The records are deleted now, before their retention ends; their ids can be "
                "admitted again."
            ),
        ),
        Operation(
            "discard",
            "discard",
            gettext_lazy("Discard"),
            gettext_lazy("Discarded"),
            operations.discard,
            _quarantined,
            removes=True,
            warning=gettext_lazy(
                "The corrupt bytes and the id both go; the id can be admitted again."
            ),
            warning_many=gettext_lazy(
                "The corrupt bytes and the ids all go; the ids can be admitted again."
            ),
        ),
        Operation(
            "restore",
            "restore",
            gettext_lazy("Restore"),
            gettext_lazy("Restored"),
            operations.restore,
            _restorable,
            warning=gettext_lazy("The record goes back into service as its stored bytes now say."),
            warning_many=gettext_lazy(
                "The records go back into service as their stored bytes now say."
            ),
        ),
    )
}


@dataclass
class Item:
    """One record on a confirmation page."""

    key: str
    queue: str
    request_id: str
    snapshot: Snapshot | None
    refusal: str | None

    @property
    def state(self) -> str:
        if self.snapshot is None:
            return "-"
        record = self.snapshot.record
        return "CORRUPT" if record is None else record.state.value


def _reachable(request: HttpRequest, op: Operation, key: str) -> tuple[str, str]:
    pair = split_key(key)
    if pair is None or pair[0] not in ledger_settings.queues:
        raise Http404("no such record")
    if not permissions.can(request.user, op.permission, pair[0]):
        raise PermissionDenied
    return pair


def confirm(
    model_admin: ActionsAdmin,
    request: HttpRequest,
    op: Operation,
    keys: list[str],
    versions: dict[str, str] | None = None,
    next_url: str = "",
) -> HttpResponse:
    """Render the confirmation page of ``op`` on ``keys``, each read afresh."""
    if not permissions.can(request.user, op.permission):
        raise PermissionDenied
    items = []
    for key in dict.fromkeys(keys):
        queue, request_id = _reachable(request, op, key)
        snap = operations.snapshot(get_ledger(queue), request_id)
        if snap is None:
            refusal: str | None = gettext("it no longer exists")
        elif model_admin.needs_quarantine and snap.quarantined is None:
            refusal = gettext("it is no longer quarantined")
        elif versions and key in versions and versions[key] != snap.version:
            refusal = gettext("it changed since it was shown")
        else:
            refusal = op.refusal(snap)
        items.append(Item(key, queue, request_id, snap, refusal))
    back = _safe_next(request, next_url) or model_admin.changelist_url()
    if len(items) == 1 and items[0].refusal:
        _refused(model_admin, request, op, items[0].request_id, items[0].refusal)
        return HttpResponseRedirect(back)
    acting = [item for item in items if not item.refusal]
    title = gettext("%(label)s: are you sure?") % {"label": op.label}
    return model_admin.render(
        request,
        "confirm_action.html",
        title,
        {
            "op": op,
            "items": items,
            "acting": acting,
            "warning": str(op.warning if len(acting or items) == 1 else op.warning_many),
            "several": len(acting or items) > 1,
            "form_url": model_admin.url("act", op.name),
            "next": next_url,
            "cancel_url": back,
        },
    )


def _refused(
    model_admin: ActionsAdmin, request: HttpRequest, op: Operation, request_id: str, why: object
) -> None:
    model_admin.message_user(
        request,
        sentence(
            gettext("%(label)s: %(request_id)r refused: %(refusal)s")
            % {"label": op.label, "request_id": request_id, "refusal": why}
        ),
        messages.ERROR,
    )


def act_view(model_admin: ActionsAdmin, request: HttpRequest, name: str) -> HttpResponse:
    """GET: the confirmation page for ``?key=..&version=..``; POST: act on what it showed."""
    op = model_admin.operations.get(name)
    if op is None:
        raise Http404("no such action")
    if not permissions.can(request.user, op.permission):
        raise PermissionDenied
    if request.method != "POST":
        keys = request.GET.getlist("key")
        if not keys:
            raise Http404("no record named")
        versions = dict(zip(keys, request.GET.getlist("version"), strict=False))
        return confirm(model_admin, request, op, keys, versions, request.GET.get("next", ""))
    items = []
    for value in request.POST.getlist("item"):
        version, _, key = value.partition(" ")
        items.append((version, key, *_reachable(request, op, key)))
    done = 0
    user = request.user
    by = str(user.get_username()) if hasattr(user, "get_username") else str(user)
    for version, key, queue, request_id in items:
        try:
            said = op.run(get_ledger(queue), request_id, version, *([by] if op.by_user else []))
        except RecordChanged as exc:
            model_admin.message_user(
                request,
                sentence(
                    gettext("%(label)s: refused: %(reason)s") % {"label": op.label, "reason": exc}
                ),
                messages.ERROR,
            )
        except LedgerError as exc:
            _refused(model_admin, request, op, request_id, exc)
        else:
            done += 1
            if isinstance(said, Note):
                model_admin.message_user(request, said.text, messages.INFO)
            entry = model_admin.model(key=key, request_id=request_id, queue=queue)
            model_admin.log_change(request, entry, f"{op.done} (version {version})")
    if done:
        message = ngettext("%(done)s: %(count)d record.", "%(done)s: %(count)d records.", done) % {
            "done": op.done,
            "count": done,
        }
        model_admin.message_user(request, message, messages.SUCCESS)
    next_url = _safe_next(request, request.POST.get("next", ""))
    return HttpResponseRedirect(next_url or model_admin.changelist_url())


def _safe_next(request: HttpRequest, url: str) -> str:
    if url and url_has_allowed_host_and_scheme(url, {request.get_host()}, request.is_secure()):
        return url
    return ""


def bulk_action(name: str) -> Callable[[Any, HttpRequest, Any], HttpResponse | None]:
    """Return the changelist action of operation ``name``: it leads to the confirmation page."""
    op = OPERATIONS[name]

    def action(model_admin: Any, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        if queryset.count() > MAX_SELECTED:
            model_admin.message_user(
                request,
                gettext("%(label)s: select at most %(count)d records at a time.")
                % {"label": op.label, "count": MAX_SELECTED},
                messages.WARNING,
            )
            return None
        keys = [row.key for row in queryset]
        # The admin's own operation of that name (the records' "fail" cancels running ones).
        chosen = getattr(model_admin, "operations", {}).get(name, op)
        return confirm(model_admin, request, chosen, keys, None, request.get_full_path())

    action.__name__ = f"{name}_selected"
    # The admin formats the description with the model's names when it lists actions.
    description = lazy(_selected_description, str)(op)
    return admin.action(permissions=[op.permission], description=description)(action)


def _selected_description(op: Operation) -> str:
    return gettext("%(label)s: selected %(verbose_name_plural)s") % {
        "label": op.label,
        "verbose_name_plural": "%(verbose_name_plural)s",
    }


def _may(action: str) -> Callable[[Any, HttpRequest], bool]:
    def has_permission(model_admin: Any, request: HttpRequest) -> bool:
        return permissions.can(request.user, action)

    return has_permission


class ActionsAdmin(LedgerModelAdmin):
    """A ledger admin with operator actions: each confirmed on its own page, then run."""

    #: Operator actions this admin offers, by name.
    operations: dict[str, Operation] = {}
    # Django asks has_<name>_permission for each action's permissions.
    has_retry_permission = _may("retry")
    has_fail_permission = _may("fail")
    has_purge_permission = _may("purge")
    has_discard_permission = _may("discard")
    has_restore_permission = _may("restore")

    def get_urls(self) -> list[URLPattern]:
        return [self.route("act/<str:name>/", partial(act_view, self), "act"), *super().get_urls()]

    def detail_context(
        self, request: HttpRequest, key: str, queue: str, request_id: str, title: str
    ) -> dict[str, Any]:
        """What the page of one id starts with: the id, its queue, the link to its history."""
        return {
            **self.page_context(request, title),
            "key": key,
            "queue": queue,
            "request_id": request_id,
            "history_url": self.url("history", quote(key)),
        }

    def action_links(
        self, request: HttpRequest, key: str, queue: str, snap: Snapshot, back_url: str
    ) -> list[dict[str, Any]]:
        """The actions this user may take on ``snap``, each a link to its confirmation.

        Done, it goes back to ``back_url``, or to the list when the id is gone.
        """
        return [
            {
                "op": op,
                "refusal": op.refusal(snap),
                "url": self.url("act", op.name)
                + "?"
                + urlencode(
                    {
                        "key": key,
                        "version": snap.version,
                        "next": self.changelist_url() if op.removes else back_url,
                    }
                ),
            }
            for op in self.operations.values()
            if permissions.can(request.user, op.permission, queue)
        ]
