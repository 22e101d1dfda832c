"""What a task reported, in the admin: the record page's bar, its live fragment, the
Workers page's running tasks. Written as a worker writes it (a pad under the claim's fence).
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from django_ledger import get_ledger
from django_ledger.core.progress import ProgressPad
from django_ledger.core.worker import Heartbeats, WorkerInfo
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_until_settled

pytest_plugins = ["tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db


@pytest.fixture
def login_as(login_as: Callable[..., Client], task_namespace: str) -> Callable[..., Client]:
    """The admin tests' ``login_as`` (``tests/admin/conftest.py``), the tasks' namespace set."""
    return login_as


def record_url(request_id: str) -> str:
    return reverse("admin:django_ledger_record_change", args=(quote(f"default {request_id}"),))


def text(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


def running_with_progress(done: int, note: str) -> tuple[str, ProgressPad]:
    """A task claimed as a worker claims it, with a report written under its fence."""
    result = tasks.add.enqueue(1, 2)
    ledger = get_ledger("default")
    claim = ledger.claim("w-1")
    assert claim is not None and claim.request_id == result.id
    pad = ProgressPad(ledger, result.id, claim.fence, interval=1.0)
    pad.set_progress(done, 200, note)
    pad.set_metadata({"file": "march.csv"})
    pad.flush()
    return result.id, pad


def test_a_running_tasks_page_shows_the_bar_and_the_live_toggle_moves_it(
    login_as: Callable[..., Client],
) -> None:
    request_id, pad = running_with_progress(50, "rows of March")
    client = login_as(superuser=True)
    page = text(client, record_url(request_id))
    bar = page[page.index('id="task-progress"') :]
    assert '<progress max="200" value="50"' in bar
    assert "50 of 200 (25%)" in bar and "rows of March" in bar
    assert '"file": "march.csv"' in bar
    assert 'id="ledger-live"' in page and 'data-fragment="progress"' in page
    pad.set_progress(150, 200, "rows of April")
    pad.flush()
    fragment = text(client, record_url(request_id) + "?fragment=progress")
    assert fragment.lstrip().startswith('<div id="task-progress"')
    assert '<progress max="200" value="150"' in fragment and "rows of April" in fragment
    assert "<html" not in fragment  # the block alone, for the live toggle to swap in


def test_an_ended_tasks_page_keeps_its_last_progress_without_the_toggle(
    login_as: Callable[..., Client],
) -> None:
    result = tasks.report_progress.enqueue(30)
    quiet = tasks.add.enqueue(2, 2)
    run_until_settled()
    client = login_as(superuser=True)
    page = text(client, record_url(result.id))
    assert '<progress max="30" value="30"' in page and "step 30" in page
    assert 'id="ledger-live"' not in page
    assert "The task reported no progress." in text(client, record_url(quiet.id))


def test_the_fragment_takes_the_permission_to_view_records(
    login_as: Callable[..., Client],
) -> None:
    request_id, _ = running_with_progress(5, "secret note")
    outsider = login_as("view_worker")
    response = outsider.get(record_url(request_id) + "?fragment=progress")
    assert response.status_code in (302, 403, 404)
    assert b"secret note" not in response.content


def test_the_workers_and_queue_pages_show_each_running_tasks_progress(
    login_as: Callable[..., Client], redis_client: Any, task_namespace: str
) -> None:
    request_id, _ = running_with_progress(120, "rows of May")
    now = int(time.time() * 1000)
    running = [{"id": request_id, "queue": "default", "name": "add", "attempt": 1, "since": now}]
    info = WorkerInfo(
        worker_id="w-1",
        host="web-1",
        pid=1,
        queues=["default"],
        concurrency=1,
        started_at=now,
        beat_at=now,
        running=running,
    )
    Heartbeats(get_ledger("default").redis, task_namespace).beat(info, ttl_s=30)
    page = text(login_as("view_worker", "view_record"), "/admin/django_ledger/worker/")
    assert re.search(r'data-progress="[^"]+"><progress max="200" value="120">', page)
    assert "120 of 200 (60%) · rows of May" in page
    # Without the permission to view the queue's records: no bar, no note.
    blind = text(login_as("view_worker"), "/admin/django_ledger/worker/")
    assert "rows of May" not in blind
    # The queue's page lists what runs from it now, with the same bar.
    queue_page = reverse("admin:django_ledger_queue_change", args=("default",))
    shown = text(login_as(superuser=True), queue_page)
    running_now = shown[shown.index('id="running-now"') :]
    assert f'data-running="{request_id}"' in running_now
    assert "120 of 200 (60%) · rows of May" in running_now
