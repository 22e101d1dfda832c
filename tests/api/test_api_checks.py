"""System checks of the API's needs: dispatch groups (E023), its apps (E041), the docs
page's files (W041); and no check of the project's schema class."""

from __future__ import annotations

import io
import types
from typing import Any

import pytest
from django.core.checks import Error, Warning
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import modify_settings, override_settings
from django.urls import include, path
from drf_spectacular.openapi import AutoSchema

from django_ledger.api.views import DocsView
from django_ledger.checks import check_api, check_settings
from django_ledger.checks.installed import API_APPS, DOCS_ASSETS_APP
from django_ledger.conf import ledger_settings

MEMORY = "django_ledger.core.dispatch.MemoryDispatchRegistry"
#: A valid connection that no check without --deploy contacts.
URL = "redis://127.0.0.1:1/0"


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


def run_check() -> str:
    out = io.StringIO()
    call_command("check", stdout=out, stderr=io.StringIO())
    return out.getvalue()


def urlconf(*patterns: Any) -> types.ModuleType:
    """A URLconf module holding ``patterns``."""
    module = types.ModuleType("ledger_test_urls")
    module.urlpatterns = list(patterns)  # type: ignore[attr-defined]
    return module


# -- E023: DISPATCH['GROUPS'] ---------------------------------------------------------

BAD_GROUPS = [
    "emails-team",
    ["emails:", "emails-team"],
    {"emails:": "emails-team"},
    {"emails:": ["emails-team", 7]},
    {"emails:": [""]},
    {"emails:": None},
    {7: ["emails-team"]},
]


@pytest.mark.parametrize("groups", BAD_GROUPS, ids=[repr(g) for g in BAD_GROUPS])
def test_bad_dispatch_groups_are_e023_with_a_hint(groups: Any) -> None:
    config = {"CONNECTION": URL, "DISPATCH": {"BACKEND": MEMORY, "GROUPS": groups}}
    with override_settings(LEDGER=config):
        messages = check_settings()
        assert ids(messages) == ["django_ledger.E023"], messages
        (error,) = messages
        assert isinstance(error, Error) and "emails-team" in error.hint
        assert error.obj == "LEDGER['DISPATCH']['GROUPS']"
        with pytest.raises(SystemCheckError, match=r"django_ledger\.E023"):
            run_check()
        with pytest.raises(ImproperlyConfigured, match=r"LEDGER\['DISPATCH'\]\['GROUPS'\]"):
            ledger_settings.dispatch_settings  # noqa: B018 (the read raises)


def test_good_dispatch_groups_pass_and_are_read_longest_prefix_first() -> None:
    groups = {"a:": ["x"], "a:b:": ("y", "z"), "": [], "shared:": []}
    config = {"CONNECTION": URL, "DISPATCH": {"BACKEND": MEMORY, "GROUPS": groups}}
    with override_settings(LEDGER=config):
        assert check_settings() == []
        assert ledger_settings.dispatch_settings.groups == (
            ("shared:", ()),
            ("a:b:", ("y", "z")),
            ("a:", ("x",)),
            ("", ()),
        )
    for empty in (None, {}):
        with override_settings(LEDGER={"DISPATCH": {"BACKEND": MEMORY, "GROUPS": empty}}):
            assert ledger_settings.dispatch_settings.groups == ()


def test_groups_is_a_known_dispatch_key() -> None:
    with override_settings(LEDGER={"CONNECTION": URL, "DISPATCH": {"GROUPS": {}}}):
        assert check_settings() == []


# -- E041: the apps the mounted API needs ---------------------------------------------


def test_the_test_project_has_every_app_the_api_needs() -> None:
    assert check_api() == []


@pytest.mark.parametrize("app", sorted(API_APPS))
def test_a_missing_app_is_e041_naming_it(app: str) -> None:
    with modify_settings(INSTALLED_APPS={"remove": app}):
        messages = check_api()
        assert ids(messages) == ["django_ledger.E041"]
        (error,) = messages
        assert isinstance(error, Error)
        assert repr(app) in error.msg and repr(app) in error.hint
        assert error.obj == "INSTALLED_APPS"
        with pytest.raises(SystemCheckError, match=r"django_ledger\.E041"):
            run_check()


@modify_settings(INSTALLED_APPS={"remove": ["rest_framework.authtoken", "drf_spectacular"]})
def test_each_missing_app_has_its_message() -> None:
    messages = check_api()
    assert ids(messages) == ["django_ledger.E041", "django_ledger.E041"]
    assert "'rest_framework.authtoken'" in messages[0].msg
    assert "'drf_spectacular'" in messages[1].msg


@modify_settings(INSTALLED_APPS={"remove": DOCS_ASSETS_APP})
def test_missing_docs_page_files_are_a_warning_with_a_hint() -> None:
    messages = check_api()
    assert ids(messages) == ["django_ledger.W041"]
    (warning,) = messages
    assert isinstance(warning, Warning) and not isinstance(warning, Error)
    assert "/api/docs/" in warning.msg and repr(DOCS_ASSETS_APP) in warning.msg
    assert "pip install drf-spectacular-sidecar" in warning.hint
    assert warning.obj == "INSTALLED_APPS"
    stderr = io.StringIO()
    call_command("check", stdout=io.StringIO(), stderr=stderr)  # said, and nothing fails
    assert "django_ledger.W041" in stderr.getvalue()


@modify_settings(INSTALLED_APPS={"remove": [*API_APPS, DOCS_ASSETS_APP]})
def test_a_project_that_does_not_mount_the_api_needs_none_of_them() -> None:
    with override_settings(ROOT_URLCONF=urlconf(path("admin/", include([])))):
        assert check_api() == []
    # One view of the API mounted on its own counts, however deep it is included.
    docs = path("docs/", DocsView.as_view(url_name="x"))
    with override_settings(
        ROOT_URLCONF=urlconf(path("a/", include([path("b/", include([docs]))])))
    ):
        assert len(check_api()) == len(API_APPS) + 1


def test_the_check_runs_with_the_ledgers_tag() -> None:
    with modify_settings(INSTALLED_APPS={"remove": "drf_spectacular"}):
        out = io.StringIO()
        with pytest.raises(SystemCheckError, match=r"django_ledger\.E041"):
            call_command("check", tags=["django_ledger"], stdout=out, stderr=io.StringIO())


# -- the project's schema class is its own ---------------------------------------------


@pytest.mark.parametrize(
    "schema_class",
    [
        "rest_framework.schemas.openapi.AutoSchema",
        "rest_framework.schemas.coreapi.AutoSchema",
        "tests.api.test_api_checks.ProjectSchema",
    ],
)
def test_any_schema_class_of_the_project_passes(settings: Any, schema_class: str) -> None:
    # The ledger's views bring drf-spectacular's (test_api_schema generates the schema
    # in a project on DRF's own class).
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_SCHEMA_CLASS": schema_class}
    assert check_api() == []
    run_check()


def test_no_schema_class_passes(settings: Any) -> None:
    settings.REST_FRAMEWORK = {
        key: value
        for key, value in settings.REST_FRAMEWORK.items()
        if key != "DEFAULT_SCHEMA_CLASS"
    }
    assert check_api() == []


class ProjectSchema(AutoSchema):  # type: ignore[misc]
    """A project's own schema class, on drf-spectacular's."""
