"""Schedules over the API: stored ones created, read, edited, paused and deleted.

Every refusal a system check gives a setting is given to a body, under its field, and
nothing is stored; settings' schedules are read-only but pausable; two editors of one
version: the second is told of a conflict.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

import tests.support.tasks_app.tasks  # noqa: F401 - the web process imported its tasks
from django_ledger.services import runtime_schedules
from tests.support.api_helpers import error_code, post_json

pytest_plugins = ["tests.support.api_fixtures"]

LIST = "/api/schedules/"
TASK = "tests.support.tasks_app.tasks.add"
GOOD = {"key": "nightly", "task": TASK, "cron": "0 3 * * *", "args": [1, 2]}


def one(key: str) -> str:
    return f"/api/schedules/{key}/"


@pytest.fixture
def editor(api_client_for: Callable[..., APIClient]) -> APIClient:
    return api_client_for("view_schedule", "edit_schedule", "operate_schedule")


def test_a_schedule_is_created_read_edited_and_deleted_with_its_version(
    editor: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="django_ledger.scheduler")
    created = post_json(editor, LIST, GOOD)
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["origin"] == "stored" and body["version"] == 1 and body["fires"] is True
    assert body["schedule"] == {"task": TASK, "cron": "0 3 * * *", "args": [1, 2]}
    assert "schedule 'nightly' created by API user" in caplog.text

    edit = {"task": TASK, "every": 60, "args": [3, 4], "version": 1}
    changed = editor.put(one("nightly"), edit, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["version"] == 2 and changed.json()["schedule"]["every"] == 60
    assert [r["key"] for r in editor.get(LIST).json()] == ["nightly"]

    squared = editor.delete(one("nightly") + "?version=\u00b2")
    assert squared.status_code == 400 and error_code(squared) == "invalid"
    stale = editor.delete(one("nightly") + "?version=1")
    assert stale.status_code == 409 and error_code(stale) == "schedule_conflict"
    assert editor.delete(one("nightly") + "?version=2").status_code == 204
    assert editor.get(one("nightly")).status_code == 404
    assert "schedule 'nightly' deleted by API user" in caplog.text


def test_two_editors_of_one_version_the_second_gets_a_conflict(editor: APIClient) -> None:
    assert post_json(editor, LIST, GOOD).status_code == 201
    first = editor.put(
        one("nightly"), {"task": TASK, "every": 5, "args": [1, 2], "version": 1}, format="json"
    )
    second = editor.put(
        one("nightly"), {"task": TASK, "every": 7, "args": [1, 2], "version": 1}, format="json"
    )
    assert first.status_code == 200
    assert second.status_code == 409 and error_code(second) == "schedule_conflict"
    assert second.json()["error"]["details"] == {"version": 2}
    assert editor.get(one("nightly")).json()["schedule"]["every"] == 5


def test_a_name_taken_twice_is_refused(editor: APIClient) -> None:
    assert post_json(editor, LIST, GOOD).status_code == 201
    again = post_json(editor, LIST, {**GOOD, "cron": "@hourly"})
    assert again.status_code == 409 and error_code(again) == "schedule_conflict"
    assert editor.get(one("nightly")).json()["schedule"]["cron"] == "0 3 * * *"


def test_editing_needs_the_edit_permission(
    editor: APIClient, api_client_for: Callable[..., APIClient]
) -> None:
    viewer = api_client_for("view_schedule", "operate_schedule")
    refused = post_json(viewer, LIST, GOOD)
    assert refused.status_code == 403 and error_code(refused) == "permission_denied"
    assert viewer.get(LIST).json() == []
    assert post_json(editor, LIST, GOOD).status_code == 201
    assert viewer.delete(one("nightly")).status_code == 403
    assert viewer.get(one("nightly")).status_code == 200
    assert api_client_for().get(LIST).status_code == 403


def test_a_settings_schedule_is_read_only_but_pauses(settings: Any, editor: APIClient) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "SCHEDULES": {"nightly": {"TASK": TASK, "EVERY": 60, "ARGS": [1, 2]}},
    }
    listed = editor.get(LIST).json()
    assert [(r["key"], r["origin"], r["version"]) for r in listed] == [
        ("nightly", "settings", None)
    ]
    refused = editor.put(one("nightly"), {"task": TASK, "every": 5}, format="json")
    assert refused.status_code == 409 and error_code(refused) == "schedule_in_settings"
    clash = post_json(editor, LIST, GOOD)
    assert (
        clash.status_code == 400
        and "LEDGER['SCHEDULES']" in clash.json()["error"]["details"]["key"][0]
    )
    paused = post_json(editor, one("nightly") + "pause/", {})
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert post_json(editor, one("nightly") + "resume/", {}).json()["paused"] is False


def test_run_time_schedules_off_fire_not_and_change_not(settings: Any, editor: APIClient) -> None:
    assert post_json(editor, LIST, GOOD).status_code == 201
    settings.LEDGER = {**settings.LEDGER, "RUNTIME_SCHEDULES": False}
    (listed,) = editor.get(LIST).json()
    assert listed["fires"] is False and "RUNTIME_SCHEDULES" in listed["why_not"]
    refused = post_json(editor, LIST, {**GOOD, "key": "other"})
    assert refused.status_code == 409 and error_code(refused) == "runtime_schedules_off"


# One body per rule of the system checks (and the run-time rules), with the field
# its error is under.
REFUSED = [
    pytest.param({"task": "no_such_module.task"}, "task", id="E073-task-does-not-import"),
    pytest.param({"task": "tasks"}, "task", id="E073-not-a-dotted-path"),
    pytest.param({"every": 60}, "__all__", id="E074-cron-and-every"),
    pytest.param({"cron": "61 * * * *"}, "cron", id="E075-bad-cron"),
    pytest.param({"cron": None, "every": 0.5}, "every", id="E076-bad-interval"),
    pytest.param({"timezone": "Mars/Base"}, "timezone", id="E077-unknown-zone"),
    pytest.param({"queue": "nowhere"}, "queue", id="E078-unknown-queue"),
    pytest.param({"priority": 500}, "priority", id="E079-priority"),
    pytest.param({"misfire": "often"}, "misfire", id="E079-misfire"),
    pytest.param({"grace": -1}, "grace", id="E079-grace"),
    pytest.param({"args": "1, 2"}, "args", id="E079-args-not-a-list"),
    pytest.param({"enabled": "yes"}, "enabled", id="E079-enabled"),
    pytest.param({"task": "os.path.join"}, "task", id="E090-not-a-task"),
    pytest.param({"args": [1, 2, 3]}, "__all__", id="E091-arguments-do-not-fit"),
    pytest.param({"args": ["x" * 600_000, 1]}, "args", id="E092-payload-too-large"),
    pytest.param({"queue": "emails"}, "queue", id="E093-queue-not-declared"),
    pytest.param({"cron": None, "at": "tomorrow"}, "at", id="E094-bad-time"),
    pytest.param({"cron": None, "at": "2001-01-01T00:00:00"}, "at", id="one-off-in-the-past"),
    pytest.param({"key": "two words"}, "key", id="E071-bad-key"),
    pytest.param({"color": "red"}, "color", id="unknown-field"),
]


@pytest.mark.parametrize(("change", "field"), REFUSED)
def test_an_invalid_schedule_is_refused_under_its_field_and_nothing_is_stored(
    editor: APIClient, settings: Any, change: dict[str, Any], field: str
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "QUEUES": {**settings.LEDGER["QUEUES"], "default": {"MAX_PAYLOAD_BYTES": 500_000}},
    }
    body = {name: value for name, value in {**GOOD, **change}.items() if value is not None}
    response = post_json(editor, LIST, body)
    assert response.status_code == 400, response.content
    assert error_code(response) == "invalid"
    details = response.json()["error"]["details"]
    assert list(details) == [field] and details[field][0]
    assert editor.get(LIST).json() == []


def test_a_task_outside_the_project_is_never_imported(editor: APIClient) -> None:
    os.environ.pop("LEDGER_SCHEDULE_TRAP_IMPORTED", None)
    response = post_json(editor, LIST, {**GOOD, "task": "tests.support.schedule_trap.run"})
    assert response.status_code == 400
    assert "installed app" in response.json()["error"]["details"]["task"][0]
    assert "tests.support.schedule_trap" not in sys.modules
    assert "LEDGER_SCHEDULE_TRAP_IMPORTED" not in os.environ


def test_huge_args_are_refused_before_they_are_read(editor: APIClient) -> None:
    response = post_json(editor, LIST, {**GOOD, "args": ["x" * (8 * 1024 * 1024)]})
    assert response.status_code == 413 and error_code(response) == "body_too_large"
    assert runtime_schedules.stored().definitions == {}


def test_a_queue_the_caller_does_not_reach_hides_its_schedules_and_refuses_new_ones(
    settings: Any, editor: APIClient, api_client_for: Callable[..., APIClient]
) -> None:
    queues = {**settings.LEDGER["QUEUES"], "emails": {"GROUPS": ["mail-team"]}}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues}
    assert post_json(editor, LIST, GOOD).status_code == 201
    mail = {**GOOD, "key": "mail", "task": "tests.support.tasks_app.tasks.on_emails"}
    mail.update(queue="emails", args=[1])
    refused = post_json(editor, LIST, mail)
    assert refused.status_code == 404 and error_code(refused) == "queue_not_found"
    member = api_client_for("view_schedule", "edit_schedule", groups=("mail-team",))
    assert post_json(member, LIST, mail).status_code == 201, "a member of the group may"
    assert [r["key"] for r in editor.get(LIST).json()] == ["nightly"]
    assert editor.get(one("mail")).status_code == 404
    assert sorted(r["key"] for r in member.get(LIST).json()) == ["mail", "nightly"]
