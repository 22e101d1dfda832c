"""An outbox row's kind (task, workflow) is a column: the delivery reads it, never the payload.

Rows written before the column existed get theirs from migration 0007, which reads their
payload once (a workflow's starts with ``{"workflow":``); run here on a SQLite file by
``manage.py migrate``, as a deployment runs it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from django_ledger.core.flows import FlowStep
from django_ledger.core.jobs import encode_task
from django_ledger.models import OutboxEntry
from django_ledger.outbox.models import OutboxKind
from django_ledger.outbox.workflow_rows import row_id, row_of
from django_ledger.queues import queues
from django_ledger.services.relay import Relay
from django_ledger.tasks.workflows import get_workflow

pytest_plugins = ["tests.support.tasks_fixtures"]

ROOT = Path(__file__).resolve().parents[2]


def _workflow_payload(flow_id: str) -> str:
    return row_of(
        flow_id,
        [FlowStep("0", encode_task("tests.support.tasks_app.workflow_tasks.plus", [1], {}))],
    )


@pytest.mark.django_db(transaction=True)
def test_a_workflow_row_is_admitted_as_a_workflow(task_namespace: str) -> None:
    OutboxEntry.objects.create(
        id=row_id("by-kind"),
        backend="default",
        queue="default",
        payload=_workflow_payload("by-kind"),
        kind=OutboxKind.WORKFLOW,
    )
    assert Relay().run_once() == 1
    assert [step.state for step in get_workflow("by-kind").steps] == ["PENDING"]
    assert OutboxEntry.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_task_row_is_admitted_as_a_task_whatever_its_payload_says(task_namespace: str) -> None:
    payload = _workflow_payload("not-a-workflow")
    OutboxEntry.objects.create(id="task-1", backend="default", queue="default", payload=payload)
    assert OutboxEntry.objects.get().kind == OutboxKind.TASK  # the column's default
    assert Relay().run_once() == 1
    ledger = queues.get("default").ledger
    assert ledger.stats().pending == 1
    record = ledger.resolve("task-1")
    assert record is not None and record.payload == payload  # admitted as it is, a task
    assert OutboxEntry.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_row_of_a_kind_this_version_does_not_know_is_kept(
    task_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    OutboxEntry.objects.create(
        id="later-1", backend="default", queue="default", payload="{}", kind="report"
    )
    assert Relay().run_once() == 0
    assert list(OutboxEntry.objects.values_list("id", flat=True)) == ["later-1"]
    assert queues.get("default").ledger.stats().pending == 0
    assert "row 'later-1' has kind 'report', which is not delivered here" in caplog.text


def _migrate(database: Path, migration: str) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
        "DATABASE_PATH": str(database),
        "REDIS_URL": "redis://127.0.0.1:1/0",  # never reached: migrate needs no Redis
        "PYTHONPATH": str(ROOT),
    }
    out = subprocess.run(
        [sys.executable, "manage.py", "migrate", "django_ledger", migration, "-v", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr


def test_migrating_marks_the_workflow_rows_written_before(tmp_path: Path) -> None:
    database = tmp_path / "before.sqlite3"
    _migrate(database, "0006")
    task = encode_task("tests.support.tasks_app.tasks.add", [1, 2], {})
    with sqlite3.connect(database) as connection:
        connection.executemany(
            "INSERT INTO django_ledger_outbox "
            "(id, backend, queue, payload, delay_ms, priority, created_at, target) "
            "VALUES (?, 'default', 'default', ?, 0, 0, '2026-01-01 00:00:00', '')",
            [("task-1", task), (row_id("flow-1"), _workflow_payload("flow-1"))],
        )
    _migrate(database, "0007")
    with sqlite3.connect(database) as connection:
        kinds = dict(connection.execute("SELECT id, kind FROM django_ledger_outbox"))
    assert kinds == {"task-1": "task", "workflow:flow-1": "workflow"}
