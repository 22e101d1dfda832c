"""The admin's view of tasks: a record page's task section, the records list's task filter."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_until_settled

pytest_plugins = ["tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/django_ledger/record/"
ROW = re.compile(r'<th class="field-request_id"><a href="[^"]*">([^<]*)</a></th>')


@pytest.fixture
def admin_client_(django_user_model: Any, task_namespace: str) -> Client:
    user = django_user_model(username="admin", is_staff=True, is_superuser=True)
    user.set_unusable_password()
    user.save()
    client = Client()
    client.force_login(user)
    return client


def page(client: Client, request_id: str, queue: str = "default") -> str:
    url = reverse("admin:django_ledger_record_change", args=(quote(f"{queue} {request_id}"),))
    response = client.get(url)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def test_a_task_page_shows_its_call_attempts_errors_and_result(admin_client_: Client) -> None:
    result = tasks.flaky.enqueue(2)
    run_until_settled()
    text = page(admin_client_, result.id)
    section = text[text.index('id="task"') :]
    assert "Task flaky" in section and "tests.support.tasks_app.tasks.flaky" in section
    assert re.search(r'id="task-args">\[\s*2\s*\]', section)
    assert 'data-field="task-status" colspan="2">SUCCESSFUL' in section
    assert len(re.findall(r'<tr data-attempt="\d">', section)) == 3
    # Errors fold: the summary names the class and the last line, the traceback opens.
    summaries = re.findall(r"<summary><code>([^<]*)</code>: ([^<]*)</summary>", section)
    assert summaries == [
        ("builtins.ConnectionError", "attempt 1 failed"),
        ("builtins.ConnectionError", "attempt 2 failed"),
    ]
    # The task's own max_attempts (4), not the queue's.
    assert re.search(r'data-field="attempts">3</td><td class="ledger-note">of at most 4<', text)
    assert section.count("<details") == 2 and "Traceback (most recent call last)" in section
    assert re.search(r'id="task-result">3</pre>', section)


def test_a_page_of_a_raw_payload_has_no_task_section(admin_client_: Client) -> None:
    from django_ledger import get_ledger

    get_ledger("default").admit("raw-1", "not a task document")
    assert 'id="task"' not in page(admin_client_, "raw-1")


def test_the_records_list_filters_by_task(admin_client_: Client) -> None:
    adds = [tasks.add.enqueue(i, i).id for i in range(3)]
    echo = tasks.echo.enqueue("a").id
    response = admin_client_.get(CHANGELIST, {"task": "tests.support.tasks_app.tasks.add"})
    assert response.status_code == 200
    listed = ROW.findall(response.content.decode())
    assert sorted(listed) == sorted(adds) and echo not in listed
    unfiltered = ROW.findall(admin_client_.get(CHANGELIST).content.decode())
    assert echo in unfiltered
    assert "tests.support.tasks_app.tasks.add" in admin_client_.get(CHANGELIST).content.decode()


def test_an_unknown_task_in_the_filter_is_refused(admin_client_: Client) -> None:
    response = admin_client_.get(CHANGELIST, {"task": "shop.tasks.nothing"})
    assert response.status_code in (200, 302)
    assert ROW.findall(response.content.decode()) == []
