"""A workflow's admin page and API read: steps in order, states, results, errors; permissions."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from django_ledger.admin.workflows import step_workflow_url, workflow_url
from django_ledger.tasks import enqueue_many, enqueue_once
from django_ledger.tasks.exceptions import TaskIdConflict
from django_ledger.tasks.workflows import Workflow, chain, chord, get_workflow, group, si, sig
from tests.support.tasks_app import workflow_tasks as t
from tests.support.tasks_helpers import run_until_settled

pytest_plugins = ["tests.support.api_fixtures"]
pytestmark = [pytest.mark.django_db]


def failed_workflow() -> str:
    graph = Workflow()
    a = graph.add(sig(t.plus, 1), name="a")
    b = graph.add(si(t.broken, "boom"), after=[a], name="b")
    graph.add(sig(t.plus), after=[b], name="c")
    graph.add(si(t.plus, 5), after=[b], name="d", on_failure="continue")
    flow = graph.enqueue(id="wf-admin")
    run_until_settled()
    return flow.id


def staff(make_user: Callable[..., User], *actions: str) -> Client:
    client = Client()
    client.force_login(make_user(*actions, is_staff=True))
    return client


def test_the_page_shows_the_steps_in_order_with_states_results_and_errors(
    api_make_user: Callable[..., User],
) -> None:
    flow_id = failed_workflow()
    response = staff(api_make_user, "view").get(workflow_url("default", flow_id))
    assert response.status_code == 200
    text = html.unescape(response.content.decode())
    rows = re.findall(r'<tr data-step="([^"]+)" data-state="([^"]+)">', text)
    assert rows == [("a", "COMPLETED"), ("b", "FAILED"), ("c", "CANCELLED"), ("d", "COMPLETED")]
    assert "ValueError: boom" in text
    assert f"StepCancelled: parent step {flow_id}:b ended FAILED: ValueError: boom" in text
    assert "<code>2</code>" in text and "<code>6</code>" in text  # plus(1), plus(5)
    # Each step links to its record page; the record page's link leads back here.
    record_page = reverse("admin:django_ledger_record_change", args=(quote("default wf-admin:a"),))
    assert f'href="{record_page}"' in text
    assert step_workflow_url("default", f"{flow_id}:c") == workflow_url("default", flow_id)
    assert step_workflow_url("default", "not-a-step") == ""


def test_the_page_needs_the_view_permission_on_the_queue(
    api_make_user: Callable[..., User],
) -> None:
    flow_id = failed_workflow()
    assert staff(api_make_user).get(workflow_url("default", flow_id)).status_code == 404
    anonymous = Client().get(workflow_url("default", flow_id))
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    viewer = staff(api_make_user, "view")
    assert viewer.get(workflow_url("default", "no-such")).status_code == 404
    assert viewer.get(workflow_url("nope", flow_id)).status_code == 404


def test_the_api_reads_a_workflow(api_client_for: Callable[..., APIClient]) -> None:
    flow = chain(sig(t.plus, 1), sig(t.plus)).enqueue(id="wf-api")
    client = api_client_for("view")
    url = "/api/queues/default/workflows/wf-api/"
    body = client.get(url).json()
    assert [(s["name"], s["state"]) for s in body["steps"]] == [("0", "PENDING"), ("1", "WAITING")]
    assert body["steps"][1]["waiting_for"] == 1 and not body["finished"]
    run_until_settled()
    body = client.get(url).json()
    assert body["successful"] and [s["return_value"] for s in body["steps"]] == [2, 3]
    assert body["steps"][1]["task_id"] == flow.task_ids["1"]
    missing = client.get("/api/queues/default/workflows/nope/")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "workflow_not_found"


def test_the_api_refuses_without_the_permission(
    api_client_for: Callable[..., APIClient], api_anonymous: APIClient
) -> None:
    chain(sig(t.plus, 1)).enqueue(id="wf-api")
    url = "/api/queues/default/workflows/wf-api/"
    assert api_anonymous.get(url).status_code == 401
    assert api_client_for("admit").get(url).status_code == 403


def test_the_api_schema_documents_the_workflow_read_with_no_warnings(tmp_path: Any) -> None:
    path = tmp_path / "schema.json"
    stderr = StringIO()
    args = ("--validate", "--fail-on-warn", "--format", "openapi-json", "--file", str(path))
    call_command("spectacular", *args, stderr=stderr)
    assert "warning" not in stderr.getvalue().lower(), stderr.getvalue()
    operation = json.loads(path.read_text())["paths"][
        "/api/queues/{queue}/workflows/{workflow_id}/"
    ]["get"]
    assert operation["security"] == [{"tokenAuth": []}, {"cookieAuth": []}]
    assert {"200", "400", "401", "403", "404", "429", "503"} <= set(operation["responses"])


def test_no_face_takes_a_waiting_steps_id(api_client_for: Callable[..., APIClient]) -> None:
    flow = chain(sig(t.plus, 1), sig(t.plus)).enqueue(id="order-42")
    waiting = flow.task_ids["1"]
    with pytest.raises(TaskIdConflict, match="waits for its parents") as caught:
        enqueue_once(t.plus, waiting, 1_000_000)
    assert caught.value.reason == "workflow_step"
    with pytest.raises(TaskIdConflict, match="waits for its parents"):
        enqueue_many(t.plus, [((1_000_000,), {})], ids=[waiting])
    client = api_client_for("admit")
    forged = {"request_id": waiting, "payload": '{"args":[1000000],"task":"x","v":1}'}
    answer = client.post("/api/queues/default/admit/", forged, format="json")
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "workflow_step"
    batch = client.post("/api/queues/default/admit/batch/", {"items": [forged]}, format="json")
    assert [(r["status"], r["reason"]) for r in batch.json()["results"]] == [
        ("CONFLICT", "workflow_step")
    ]
    run_until_settled()
    state = get_workflow("order-42")
    assert state.successful and state.results == {"0": 2, "1": 3}  # its own arguments


def big_chord(size: int) -> str:
    return chord(group(sig(t.square, n) for n in range(size)), sig(t.plus)).enqueue(id="wide").id


def test_the_api_answers_a_large_workflow_a_page_at_a_time(
    api_client_for: Callable[..., APIClient],
) -> None:
    big_chord(250)
    client = api_client_for("view")
    url = "/api/queues/default/workflows/wide/"
    first = client.get(url).json()
    assert len(first["steps"]) == 20 and first["offset"] == 0 and first["next_offset"] == 20
    assert first["total_steps"] == 251
    assert first["counts"] == {"PENDING": 250, "WAITING": 1} and not first["finished"]
    names: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = client.get(url, {"offset": offset, "limit": 100}).json()
        assert len(page["steps"]) <= 100
        names += [s["name"] for s in page["steps"]]
        offset = page["next_offset"]
    assert names == [str(n) for n in range(251)]
    last = client.get(url, {"offset": 250, "limit": 1000}).json()
    assert [s["state"] for s in last["steps"]] == ["WAITING"] and last["next_offset"] is None
    assert client.get(url, {"offset": 900}).json()["steps"] == []
    for bad in ({"limit": "0"}, {"offset": "-1"}, {"limit": "x"}, {"offset": "9" * 40}):
        response = client.get(url, bad)
        assert response.status_code == 400 and response.json()["error"]["code"] == "invalid"


def test_the_page_shows_a_large_workflow_a_page_at_a_time(
    api_make_user: Callable[..., User],
) -> None:
    big_chord(250)
    client = staff(api_make_user, "view")
    url = workflow_url("default", "wide")
    text = html.unescape(client.get(url).content.decode())
    rows = re.findall(r'<tr data-step="([^"]+)" data-state="([^"]+)">', text)
    assert rows == [(str(n), "PENDING") for n in range(100)]
    assert "251 \u00b7 250 PENDING \u00b7 1 WAITING" in text  # every step counted
    assert "page 1 of 3" in text and 'href="?page=2"' in text
    last = html.unescape(client.get(url, {"page": 3}).content.decode())
    rows = re.findall(r'<tr data-step="([^"]+)" data-state="([^"]+)">', last)
    assert rows[-1] == ("250", "WAITING") and len(rows) == 51
    assert "0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 240 more" in last
    assert client.get(url, {"page": 4}).status_code == 404
    assert client.get(url, {"page": "0"}).status_code == 404
