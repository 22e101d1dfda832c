"""The admin's schedule form: add, edit and delete stored schedules; settings' stay read-only.

Every refusal of the system checks shows under its field and stores nothing; of two
admins editing one version, the second is told the first saved; each change is in the
admin's history with who and what.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Permission
from django.test import Client

import tests.support.tasks_app.tasks  # noqa: F401 - the project imported its tasks
from django_ledger.core.schedule import definitions_key, state_key
from django_ledger.services import runtime_schedules

pytestmark = pytest.mark.django_db

LIST = "/admin/django_ledger/schedule/"
ADD = f"{LIST}add/"
TASK = "tests.support.tasks_app.tasks.add"
GOOD = {"key": "nightly", "task": TASK, "cron": "0 3 * * *", "args": "[1, 2]", "enabled": "on"}


@pytest.fixture
def stored_namespace(settings: Any, namespace: str, redis_client: redis.Redis) -> Iterator[str]:
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "DISPATCH": {"NAMESPACE": namespace},
        "QUEUES": {"default": {"MAX_PAYLOAD_BYTES": 2000}, "emails": {}},
        "SCHEDULES": {"beat": {"TASK": "tests.support.tasks_app.tasks.noop", "EVERY": 60}},
    }
    yield namespace
    redis_client.delete(state_key(namespace), definitions_key(namespace))


@pytest.fixture
def admin_with(django_user_model: Any) -> Callable[..., Client]:
    def build(*codenames: str) -> Client:
        user = django_user_model.objects.create(username=f"u{len(codenames)}", is_staff=True)
        perms = Permission.objects.filter(codename__in=codenames)
        user.user_permissions.add(*perms)
        client = Client()
        client.force_login(user)
        return client

    return build


@pytest.fixture
def editor(admin_with: Callable[..., Client], stored_namespace: str) -> Client:
    return admin_with("view_schedule", "edit_schedule", "operate_schedule")


def test_a_schedule_is_added_edited_and_deleted_with_its_history(editor: Client) -> None:
    page = editor.get(LIST).content.decode()
    assert 'id="add-schedule"' in page
    added = editor.post(ADD, GOOD)
    assert added.status_code == 302 and added.url == f"{LIST}nightly/change/"
    detail = editor.get(added.url).content.decode()
    assert 'id="edit-button"' in detail and "Stored at run time" in detail
    form = editor.get(f"{LIST}nightly/edit/").content.decode()
    assert "takes effect from its next fire after you save" in form
    assert 'name="version" value="1"' in form
    edited = editor.post(f"{LIST}nightly/edit/", {**GOOD, "cron": "0 4 * * *", "version": "1"})
    assert edited.status_code == 302
    assert runtime_schedules.stored().definitions["nightly"].entry["CRON"] == "0 4 * * *"
    assert editor.post(f"{LIST}nightly/delete-stored/").status_code == 302
    assert runtime_schedules.stored().definitions == {}
    flags = list(LogEntry.objects.order_by("id").values_list("action_flag", "change_message"))
    assert [flag for flag, _ in flags] == [ADDITION, CHANGE, DELETION]
    assert "CRON='0 4 * * *'" in flags[1][1] and "version 2" in flags[1][1]


FORM_REFUSED = [
    pytest.param({"task": "no_such_module.task"}, "task", id="E073-does-not-import"),
    pytest.param({"every": "60"}, None, id="E074-cron-and-every"),
    pytest.param({"cron": "61 * * * *"}, "cron", id="E075-bad-cron"),
    pytest.param({"cron": "", "every": "0"}, "every", id="E076-bad-interval"),
    pytest.param({"timezone": "Mars/Base"}, "timezone", id="E077-unknown-zone"),
    pytest.param({"queue": "nowhere"}, "queue", id="E078-unknown-queue"),
    pytest.param({"priority": "500"}, "priority", id="E079-priority"),
    pytest.param({"grace": "-1"}, "grace", id="E079-grace"),
    pytest.param({"task": "os.path.join"}, "task", id="E090-not-a-task"),
    pytest.param({"args": "[1]"}, None, id="E091-arguments-do-not-fit"),
    pytest.param({"args": '["' + "x" * 3000 + '", 1]'}, "args", id="E092-payload-too-large"),
    pytest.param({"queue": "emails"}, "queue", id="E093-queue-not-declared"),
    pytest.param({"cron": "", "at": "2001-01-01T00:00:00"}, "at", id="one-off-in-the-past"),
    pytest.param({"key": "beat"}, "key", id="name-of-a-settings-schedule"),
    pytest.param({"args": "[1,"}, "args", id="not-json"),
]


@pytest.mark.parametrize(("change", "field"), FORM_REFUSED)
def test_an_invalid_schedule_shows_its_error_under_its_field_and_is_not_saved(
    editor: Client, change: dict[str, str], field: str | None
) -> None:
    response = editor.post(ADD, {**GOOD, **change})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == [field or "__all__"] and errors[field or "__all__"][0]
    assert html.escape(errors[field or "__all__"][0]) in response.content.decode()
    assert runtime_schedules.stored().definitions == {}


def test_two_admins_editing_one_version_the_second_is_told_of_the_first(editor: Client) -> None:
    assert editor.post(ADD, GOOD).status_code == 302
    first = editor.post(f"{LIST}nightly/edit/", {**GOOD, "cron": "0 5 * * *", "version": "1"})
    second = editor.post(f"{LIST}nightly/edit/", {**GOOD, "cron": "0 6 * * *", "version": "1"})
    assert first.status_code == 302 and second.status_code == 200
    assert "Another change to this schedule was saved first" in second.content.decode()
    assert runtime_schedules.stored().definitions["nightly"].entry["CRON"] == "0 5 * * *"


def test_a_settings_schedule_has_no_form_and_editing_needs_the_permission(
    editor: Client, admin_with: Callable[..., Client]
) -> None:
    detail = editor.get(f"{LIST}beat/change/").content.decode()
    assert 'id="edit-button"' not in detail and "it changes by a deploy" in detail
    assert editor.get(f"{LIST}beat/edit/").status_code == 302  # no stored schedule "beat"
    viewer = admin_with("view_schedule")
    assert 'id="add-schedule"' not in viewer.get(LIST).content.decode()
    assert viewer.post(ADD, GOOD).status_code == 403
    assert runtime_schedules.stored().definitions == {}


def test_with_run_time_schedules_off_the_form_says_why(editor: Client, settings: Any) -> None:
    assert editor.post(ADD, GOOD).status_code == 302
    settings.LEDGER = {**settings.LEDGER, "RUNTIME_SCHEDULES": False}
    page = editor.get(LIST).content.decode()
    assert 'id="runtime-off"' in page and "not run: run-time schedules are off" in page
    assert 'id="runtime-off"' in editor.get(ADD).content.decode()
