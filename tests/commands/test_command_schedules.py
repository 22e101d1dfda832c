"""``manage.py ledger_schedules``: list, add, edit, pause, resume and delete schedules."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import tests.support.tasks_app.tasks  # noqa: F401 - the project imported its tasks
from django_ledger.services import runtime_schedules

pytest_plugins = ["tests.support.api_fixtures"]

TASK = "tests.support.tasks_app.tasks.add"


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("ledger_schedules", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_add_edit_pause_resume_and_delete_a_stored_schedule(api_namespace: str) -> None:
    assert run("add", "nightly", "--task", TASK, "--cron", "0 3 * * *", "--args", "[1, 2]") == (
        "saved nightly (version 1)\n"
    )
    assert run("list") == f"nightly  {TASK}  CRON=0 3 * * *  (stored, version 1)\n"
    # An edit keeps what it does not change; a new timing replaces the old one.
    assert (
        run("edit", "nightly", "--every", "60", "--version", "1") == "saved nightly (version 2)\n"
    )
    stored = runtime_schedules.stored().definitions["nightly"]
    assert stored.entry == {"TASK": TASK, "EVERY": 60, "ARGS": [1, 2]}
    assert "(ledger_schedules)" in stored.by
    assert run("pause", "nightly") == "paused nightly\n"
    assert "paused" in run("list")
    assert run("resume", "nightly") == "resumed nightly\n"
    with pytest.raises(CommandError, match="it is at version 2"):
        run("delete", "nightly", "--version", "1")
    assert run("delete", "nightly") == "deleted nightly\n"
    assert run("list") == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cron", "0 3 * * *", "--args", "[1]"), "ARGS and KWARGS do not fit"),
        (("--cron", "0 3 * * *", "--args", "[1,"), "ARGS: Expecting value"),
        (("--every", "often", "--args", "[1, 2]"), "EVERY: invalid literal"),
        (("--cron", "0 3 * * *", "--timezone", "Mars/Base", "--args", "[1, 2]"), "TIMEZONE:"),
    ],
)
def test_an_invalid_schedule_is_not_saved(
    api_namespace: str, args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(CommandError, match=r"(?s)^not saved:\n.*" + message):
        run("add", "nightly", "--task", TASK, *args)
    assert runtime_schedules.stored().definitions == {}


def test_a_settings_schedule_is_listed_and_paused_but_not_edited(
    api_namespace: str, settings: Any
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "SCHEDULES": {"nightly": {"TASK": TASK, "CRON": "0 3 * * *", "ARGS": [1, 2]}},
    }
    assert run("list") == f"nightly  {TASK}  CRON=0 3 * * *  (settings)\n"
    with pytest.raises(CommandError, match="it changes by a deploy"):
        run("edit", "nightly", "--cron", "0 4 * * *")
    assert run("pause", "nightly") == "paused nightly\n"
    with pytest.raises(CommandError, match="There is no schedule 'other'"):
        run("pause", "other")
