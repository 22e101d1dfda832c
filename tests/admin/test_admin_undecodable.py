"""Records whose task payload cannot be decoded: the admin shows them, never fails.

The core ``Ledger.admit`` admits any string, so a payload too deep to decode (or not
JSON at all) can sit in a task queue. Its record page shows the raw bytes and says why,
and the records list filtered by task shows it as undecodable.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from django_ledger import get_ledger
from tests.support.tasks_app import tasks

pytest_plugins = ["tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/django_ledger/record/"
ADD = "tests.support.tasks_app.tasks.add"
ROW = re.compile(r'<tr[^>]*>\s*<td class="action-checkbox">.*?</tr>', re.S)
DEPTH = 100_000


def deep_payload(task: str = ADD, depth: int = DEPTH) -> str:
    """A task document whose args nest ``depth`` arrays deep (built as text)."""
    return '{"v":1,"task":"' + task + '","args":' + "[" * depth + "]" * depth + "}"


BAD_JSON = '{"v":1,"task":"' + ADD + '","args":[1,'


@pytest.fixture
def admin_client_(django_user_model: Any, task_namespace: str) -> Client:
    user = django_user_model(username="admin", is_staff=True, is_superuser=True)
    user.set_unusable_password()
    user.save()
    client = Client()
    client.force_login(user)
    return client


def record_page(client: Client, request_id: str) -> str:
    url = reverse("admin:django_ledger_record_change", args=(quote(f"default {request_id}"),))
    response = client.get(url)
    assert response.status_code == 200, response.content[:2000]
    return html.unescape(response.content.decode())


def rows(text: str) -> dict[str, str]:
    """The listed rows by request id: each row's text, tags stripped."""
    found = {}
    for row in ROW.findall(text):
        request_id = re.search(r'<th class="field-request_id"><a href="[^"]*">([^<\s]*)', row)
        assert request_id is not None
        found[html.unescape(request_id.group(1))] = html.unescape(re.sub(r"<[^>]+>", " ", row))
    return found


@pytest.mark.parametrize("payload", [deep_payload(), BAD_JSON], ids=["deep", "bad-json"])
def test_a_record_page_of_an_undecodable_payload_shows_its_raw_bytes(
    admin_client_: Client, payload: str
) -> None:
    get_ledger("default").admit("undecodable-1", payload)
    text = record_page(admin_client_, "undecodable-1")
    note = re.search(r'<p class="errornote" id="payload-undecodable">([^<]*)</p>', text)
    assert note is not None, "no note says the payload does not decode"
    assert "does not decode" in note.group(1)
    assert ("nests deeper" in note.group(1)) == (payload != BAD_JSON)
    shown = re.search(r'<pre class="ledger-payload" id="payload">(.*?)</pre>', text, re.S)
    assert shown is not None and shown.group(1).startswith(payload[:60])
    assert 'id="task"' not in text  # no task section made up from what does not decode


def test_the_list_filtered_by_task_shows_an_undecodable_row_and_the_good_ones(
    admin_client_: Client,
) -> None:
    good = tasks.add.enqueue(1, 2).id
    ledger = get_ledger("default")
    ledger.admit("deep-1", deep_payload())
    ledger.admit("bad-1", BAD_JSON)
    ledger.admit("other-task", deep_payload("tests.support.tasks_app.tasks.echo"))
    response = admin_client_.get(CHANGELIST, {"task": ADD})
    assert response.status_code == 200, response.content[:2000]
    listed = rows(response.content.decode())
    assert set(listed) == {good, "deep-1", "bad-1"}
    assert "undecodable" in listed["deep-1"] and "undecodable" in listed["bad-1"]
    assert "undecodable" not in listed[good]
    # Unfiltered, every row lists, and nothing here reads payloads.
    assert admin_client_.get(CHANGELIST).status_code == 200
