"""What every ledger admin shares: read-only permissions, Redis queries, actions, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters, ShowFacets
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext, gettext_lazy

from .. import permissions
from ..core.errors import LedgerError
from .display import sentence
from .lookups import Spec, join_key, split_key
from .query import LedgerQuery
from .record_query import RecordQuery

__all__ = ["LedgerModelAdmin", "PagesAdmin", "record_url"]

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic in the stubs only
    _ModelAdmin = admin.ModelAdmin


def record_url(queue: str, request_id: str, site_name: str | None = None) -> str:
    """The page of record ``request_id`` of ``queue`` (on the admin site ``site_name``)."""
    return reverse(
        "admin:django_ledger_record_change",
        args=(quote(join_key(queue, request_id)),),
        current_app=site_name,
    )


class LedgerModelAdmin(_ModelAdmin):
    """A read-only admin over Redis: nothing is added, changed or deleted by forms."""

    #: The ``permissions.can`` action that lets a user see this admin's pages.
    view_action = "view"
    #: Whether an id must be quarantined for this admin to show or act on it.
    needs_quarantine = False
    query_class: type[LedgerQuery] = RecordQuery

    # What cannot work on Redis is off: facets would count every record per choice,
    # a date hierarchy needs dates of every record, and there is nothing to edit.
    show_facets = ShowFacets.NEVER
    show_full_result_count = False
    date_hierarchy = None
    list_editable = ()
    list_per_page = 100
    list_max_show_all = 500
    search_help_text = gettext_lazy("An exact request id.")

    # -- permissions ----------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if not permissions.can(request.user, self.view_action):
            return False
        return obj is None or permissions.can_reach_queue(request.user, obj.queue)

    def need_view(self, request: HttpRequest) -> None:
        """Refuse a user who may not see this admin's pages."""
        if not self.has_view_permission(request):
            raise PermissionDenied

    def can_view_queue(self, request: HttpRequest, queue: str) -> bool:
        return permissions.can(request.user, self.view_action, queue)

    # -- the query ------------------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> Any:
        # Only the queues this user may see, whatever the URL asks for later.
        queues = tuple(permissions.allowed_queues(request.user, self.view_action))
        return self.query_class(self.model, Spec(queues=queues))

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> Any:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(request_id=term), False

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> Any:
        # Django 6.1 passes action_location (and warns about overrides without it);
        # Django 5.2 has no such argument.
        if action_location is None:
            actions = super().get_actions(request)
        else:
            actions = super().get_actions(request, action_location=action_location)  # type: ignore[call-arg]
        # Deleting rows of a table that does not exist: never. Purge is the real action.
        actions.pop("delete_selected", None)
        return actions

    def action_checkbox(self, obj: Any) -> SafeString:
        # The stock column renders a form widget through the template engine for every
        # row, a fifth of a page's time; the same markup, written directly.
        label = gettext("Select this object for an action - {}")
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(obj.pk),
            format_html(label, str(obj)),
        )

    # -- views ----------------------------------------------------------------------

    def page_context(self, request: HttpRequest, title: str) -> dict[str, Any]:
        """What every page of this admin starts with: the site's context, a title, ``opts``."""
        return {
            **self.admin_site.each_context(request),
            "title": title,
            "subtitle": None,
            "opts": self.opts,
        }

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        try:
            return super().get_changelist_instance(request)
        except IncorrectLookupParameters as exc:
            # The admin answers with its normal error page (a redirect to "?e=1");
            # this message says what was wrong with the URL.
            reason = str(exc) or gettext("no such page")
            message = gettext("The list cannot show that: %(reason)s") % {"reason": reason}
            self.message_user(request, sentence(message), messages.ERROR)
            raise

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return self.guard(request, self.stock_changelist, request, extra_context)

    def stock_changelist(
        self, request: HttpRequest, extra_context: dict[str, Any] | None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        if isinstance(response, TemplateResponse):
            response.render()  # read Redis here, where its errors are caught
        return response

    def guard(
        self, request: HttpRequest, view: Callable[..., HttpResponse], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        """Call ``view(*args, **kwargs)``; answer a Redis failure with a page that says so (503)."""
        try:
            return view(*args, **kwargs)
        except LedgerError as exc:
            title = gettext("The ledger is unavailable")
            response = self.render(
                request, "unavailable.html", title, {"error": sentence(str(exc))}
            )
            response.status_code = 503
            return response.render()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        return self.guard(request, self.open_key, request, object_id)

    def open_key(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Check that this user may see the record ``object_id`` names; then ``detail`` it."""
        self.need_view(request)
        key = unquote(object_id)
        pair = split_key(key)
        if pair is None or not self.can_view_queue(request, pair[0]):
            return self.not_found(request, key)
        queue, request_id = pair
        return self.detail(request, key, queue, request_id)

    def detail(self, request: HttpRequest, key: str, queue: str, request_id: str) -> HttpResponse:
        """Show one id of ``queue`` (the admins of records and quarantine say how)."""
        raise NotImplementedError

    def render(
        self, request: HttpRequest, template: str, title: str, context: dict[str, Any]
    ) -> TemplateResponse:
        """Answer with ``admin/django_ledger/<template>``: ``page_context`` and ``context``."""
        return TemplateResponse(
            request,
            f"admin/django_ledger/{template}",
            {**self.page_context(request, title), **context},
        )

    def route(self, pattern: str, view: Callable[..., HttpResponse], name: str) -> URLPattern:
        """``pattern`` to ``view`` behind the admin's login, named ``<app>_<model>_<name>``,
        through ``guard``, so a Redis failure answers with the page saying so."""

        def page(request: HttpRequest, **kwargs: Any) -> HttpResponse:
            return self.guard(request, view, request, **kwargs)

        opts = self.opts
        return path(
            pattern,
            self.admin_site.admin_view(page),
            name=f"{opts.app_label}_{opts.model_name}_{name}",
        )

    def url(self, name: str, *args: str) -> str:
        """The URL of this admin's page ``name`` (``changelist``, ``change``, ``act``...)."""
        return reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_{name}",
            args=args,
            current_app=self.admin_site.name,
        )

    def changelist_url(self) -> str:
        return self.url("changelist")

    def change_url(self, key: str) -> str:
        return self.url("change", quote(key))

    def not_found(self, request: HttpRequest, key: str) -> HttpResponse:
        """Say an id is not there (or not this user's to see) and go back to the list."""
        name = self.opts.verbose_name
        self.message_user(
            request,
            gettext("No %(name)s %(key)r to show: it may have been removed.")
            % {"name": name, "key": key},
            messages.WARNING,
        )
        return HttpResponseRedirect(self.changelist_url())


class PagesAdmin(LedgerModelAdmin):
    """A ledger admin whose two pages are its own views: ``overview`` and ``detail_view``.

    For what is not a record (schedules, workers): the list and the object page go
    through ``guard`` like every page, with the object id unquoted, for a user who may
    view this admin (``need_view``).
    """

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self.need_view(request)
        return self.guard(request, self.overview, request)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        self.need_view(request)
        return self.guard(request, self.detail_view, request, unquote(object_id))

    def overview(self, request: HttpRequest) -> HttpResponse:
        """The list page."""
        raise NotImplementedError

    def detail_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The page of one object, by its unquoted id."""
        raise NotImplementedError
