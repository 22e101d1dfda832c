"""The Workflows page and the "Cancel workflow" button, against a real Redis.

The list pages through a queue's workflows with a cursor (never all at once), filters by
state and links to each workflow's page; cancelling asks first, needs ``operate`` on the
queue, says what it did and writes the queue's history.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from django_ledger.admin.workflow_list import WORKFLOWS_PER_PAGE, workflow_list_url
from django_ledger.admin.workflows import workflow_url
from django_ledger.core.flow_list import MAX_SCANS, list_workflows
from django_ledger.tasks.workflows import Workflow, chain, get_workflow, si, sig
from tests.support.ledger_helpers import count_calls
from tests.support.tasks_app import workflow_tasks as t
from tests.support.tasks_helpers import run_until_settled

pytest_plugins = ["tests.support.api_fixtures"]
pytestmark = [pytest.mark.django_db]

ROW = re.compile(r'<tr data-workflow="([^"]+)" data-state="([^"]+)">(.*?)</tr>', re.S)
NEXT = re.compile(r'<a href="([^"]+)" rel="next">')


def staff(make_user: Callable[..., User], *actions: str, **kw: Any) -> Client:
    client = Client()
    client.force_login(make_user(*actions, is_staff=True, **kw))
    return client


def rows(response: Any) -> dict[str, tuple[str, str]]:
    """Workflow id -> (state, the row's cells as text), of one list page."""
    assert response.status_code == 200, response.status_code
    text = response.content.decode()
    return {
        html.unescape(flow): (state, html.unescape(re.sub(r"<[^>]+>", " ", cells)))
        for flow, state, cells in ROW.findall(text)
    }


def next_link(response: Any) -> str | None:
    found = NEXT.search(response.content.decode())
    return html.unescape(found.group(1)) if found else None


def cancel_url(workflow_id: str, queue: str = "default") -> str:
    return reverse("admin:django_ledger_workflow_cancel", args=(queue, workflow_id))


def four_workflows() -> None:
    """One of each state: COMPLETED, FAILED, CANCELLED, RUNNING (in that order)."""
    chain(sig(t.plus, 1), sig(t.plus)).enqueue(id="done")
    graph = Workflow()
    graph.add(si(t.broken, "boom"), name="a")
    graph.enqueue(id="bad")
    run_until_settled()
    chain(sig(t.plus, 1), sig(t.plus)).enqueue(id="stopped")
    chain(sig(t.plus, 1), sig(t.plus), sig(t.plus)).enqueue(id="going")


def test_the_list_shows_each_workflow_state_steps_and_times_and_filters(
    api_make_user: Callable[..., User],
) -> None:
    four_workflows()
    operator = staff(api_make_user, "view", "operate")
    assert operator.post(cancel_url("stopped")).status_code == 302
    client = staff(api_make_user, "view")
    listed = rows(client.get(workflow_list_url("default")))
    assert {flow: state for flow, (state, _) in listed.items()} == {
        "done": "COMPLETED",
        "bad": "FAILED",
        "stopped": "CANCELLED",
        "going": "RUNNING",
    }
    assert "2 / 2" in listed["done"][1] and "0 / 3" in listed["going"][1]
    assert "1 / 1" in listed["bad"][1] and "2 / 2" in listed["stopped"][1]
    # Started for each (its first step's record), ended only once every step has ended.
    started, ended = re.findall(r"\d{4}-\d\d-\d\d [\d:.]+ UTC", listed["done"][1])
    assert started <= ended
    assert len(re.findall(r"UTC", listed["going"][1])) == 1
    page = client.get(workflow_list_url("default")).content.decode()
    assert f'href="{workflow_url("default", "going")}"' in page
    for state, expected in (("RUNNING", {"going"}), ("FAILED", {"bad"}), ("COMPLETED", {"done"})):
        assert set(rows(client.get(workflow_list_url("default"), {"state": state}))) == expected


def test_the_list_pages_through_every_workflow_with_bounded_reads(
    api_make_user: Callable[..., User], redis_client: redis.Redis, api_ledger: Any
) -> None:
    ids = {f"flow-{n:03d}" for n in range(70)}
    for flow in sorted(ids):
        chain(sig(t.plus, 1), sig(t.plus)).enqueue(id=flow)  # 6 flows fields each
    client = staff(api_make_user, "view")
    seen: list[str] = []
    url: str | None = workflow_list_url("default")
    pages = 0
    while url is not None:
        with count_calls(redis_client) as calls:
            response = client.get(
                url if url.startswith("/") else workflow_list_url("default") + url
            )
        page = rows(response)
        seen += page
        pages += 1
        # Never all the workflows at once: a bounded scan, a few more rows at most than a
        # page holds (the last scan call's answer), and one summary read per row.
        assert calls.by_command.get("hscan", 0) <= MAX_SCANS
        assert len(page) < len(ids)
        assert calls.by_command.get("hgetall", 0) == 0 and calls.by_command.get("hkeys", 0) == 0
        url = next_link(response)
        assert pages < 50
    assert pages >= 2
    assert sorted(set(seen)) == sorted(ids)
    # The core's bounds, said plainly.
    first = list_workflows(api_ledger, 0, limit=WORKFLOWS_PER_PAGE)
    assert first.workflows and first.cursor != 0
    for bad in ({"cursor": -1}, {"limit": 0}, {"limit": 101}, {"state": "BOGUS"}):
        with pytest.raises(ValueError):
            list_workflows(api_ledger, **bad)


@pytest.mark.parametrize(
    "params",
    [
        {"cursor": "-1"},
        {"cursor": "abc"},
        {"cursor": "9" * 30},
        {"cursor": str(2**64)},
        {"cursor": "١٢"},  # digits, but not ASCII ones
        {"state": "BOGUS"},
        {"state": "<script>"},
    ],
)
def test_hostile_list_parameters_answer_not_found(
    api_make_user: Callable[..., User], params: dict[str, str]
) -> None:
    client = staff(api_make_user, "view")
    assert client.get(workflow_list_url("default"), params).status_code == 404


def test_the_list_needs_the_view_permission_on_the_queue(
    api_make_user: Callable[..., User], settings: Any
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "QUEUES": {**settings.LEDGER["QUEUES"], "reports": {"GROUPS": ["ops"]}},
    }
    chain(sig(t.plus, 1)).enqueue(id="wf")
    anonymous = Client().get(workflow_list_url("default"))
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert staff(api_make_user).get(workflow_list_url("default")).status_code == 403
    other_group = staff(api_make_user, "view", groups=("sales",))
    assert other_group.get(workflow_list_url("reports")).status_code == 403
    assert other_group.get(workflow_list_url("default")).status_code == 200
    ops = staff(api_make_user, "view", groups=("ops",))
    assert ops.get(workflow_list_url("reports")).status_code == 200
    assert ops.get("/admin/django_ledger/record/workflows/nope/").status_code == 404
    # The queue page and the queues list link to it for those who may see it.
    viewer = staff(api_make_user, "view", "view_queue")
    queues = viewer.get(reverse("admin:django_ledger_queue_changelist")).content.decode()
    assert f'href="{workflow_list_url("default")}"' in queues
    assert f'href="{workflow_list_url("reports")}"' not in queues
    page = viewer.get(reverse("admin:django_ledger_queue_change", args=("default",)))
    assert f'href="{workflow_list_url("default")}"' in page.content.decode()


def test_cancel_asks_first_then_cancels_says_so_and_writes_the_history(
    api_make_user: Callable[..., User],
) -> None:
    chain(sig(t.plus, 1), sig(t.plus), sig(t.plus)).enqueue(id="order-7")
    operator = staff(api_make_user, "view", "operate")
    page = operator.get(workflow_url("default", "order-7")).content.decode()
    assert f'href="{cancel_url("order-7")}"' in page
    confirm = operator.get(cancel_url("order-7"))
    assert confirm.status_code == 200
    assert (
        "order-7" in confirm.content.decode() and "csrfmiddlewaretoken" in confirm.content.decode()
    )
    assert not get_workflow("order-7").cancelled  # asking changed nothing
    done = operator.post(cancel_url("order-7"))
    assert done.status_code == 302 and done["Location"] == workflow_url("default", "order-7")
    said = [str(m) for m in get_messages(done.wsgi_request)]
    assert said == ["Cancelled workflow order-7: 3 steps not yet started were cancelled."]
    state = get_workflow("order-7")
    assert state.cancelled and state.counts == {"CANCELLED": 3}
    entry = LogEntry.objects.get(object_id="default")
    assert "Cancelled workflow order-7" in entry.get_change_message()
    # Ended: the page offers no button any more.
    page = operator.get(workflow_url("default", "order-7")).content.decode()
    assert 'id="cancel-workflow"' not in page


def test_cancel_needs_operate_and_refuses_hostile_ids(api_make_user: Callable[..., User]) -> None:
    chain(sig(t.plus, 1), sig(t.plus)).enqueue(id="wf")
    viewer = staff(api_make_user, "view")
    assert 'id="cancel-workflow"' not in viewer.get(workflow_url("default", "wf")).content.decode()
    assert viewer.get(cancel_url("wf")).status_code == 403
    assert viewer.post(cancel_url("wf")).status_code == 403
    assert staff(api_make_user, "operate").post(cancel_url("wf")).status_code == 404
    assert Client().post(cancel_url("wf")).status_code == 302  # to the login page
    assert not get_workflow("wf").cancelled
    operator = staff(api_make_user, "view", "operate")
    for hostile in ("no-such", "../wf", "wf/../wf", "x" * 5000, "%00", "wf\u202e", "*"):
        assert operator.get(cancel_url(hostile)).status_code == 404, hostile
        assert operator.post(cancel_url(hostile)).status_code == 404, hostile
        assert operator.get(workflow_url("default", hostile)).status_code == 404, hostile
    assert operator.post(cancel_url("wf", queue="nope")).status_code == 404
    assert not get_workflow("wf").cancelled
    assert not LogEntry.objects.exists()


def test_an_id_with_url_characters_lists_and_links_to_its_page(
    api_make_user: Callable[..., User],
) -> None:
    odd = 'a/b c?d=1&e#f<g>"_'
    chain(sig(t.plus, 1)).enqueue(id=odd)
    client = staff(api_make_user, "view", "operate")
    listed = rows(client.get(workflow_list_url("default")))
    assert list(listed) == [odd]
    text = client.get(workflow_list_url("default")).content.decode()
    link = re.search(r'<tr data-workflow="[^"]+" data-state="[^"]+">\s*<td><a href="([^"]+)"', text)
    assert link is not None
    assert html.unescape(link.group(1)) == workflow_url("default", odd)
    page = client.get(html.unescape(link.group(1)))
    assert page.status_code == 200 and html.escape(odd) in page.content.decode()
    cancel = re.search(r'href="([^"]+)" id="cancel-workflow"', page.content.decode())
    assert cancel is not None
    assert client.post(html.unescape(cancel.group(1))).status_code == 302
    assert get_workflow(odd).cancelled
