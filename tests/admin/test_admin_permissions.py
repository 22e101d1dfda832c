"""Who sees and does what in the ledger admin: staff, permissions, and queue groups."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from django_ledger import State
from django_ledger.conf import get_ledger
from django_ledger.core.ledger import Ledger

pytestmark = pytest.mark.django_db

RECORDS = "/admin/django_ledger/record/"
QUARANTINE = "/admin/django_ledger/quarantinedrecord/"
QUEUES = "/admin/django_ledger/queue/"
ROW = re.compile(r'<th class="field-request_id"><a href="[^"]*">([^<]*)</a></th>')
ALL = [
    "view_record",
    "retry_record",
    "fail_record",
    "purge_record",
    "view_quarantinedrecord",
    "discard_quarantinedrecord",
    "restore_quarantinedrecord",
    "view_queue",
    "operate_queue",
    "limit_queue",
    "view_schedule",
    "operate_schedule",
    "edit_schedule",
    "view_worker",
]


@pytest.fixture
def admin_ledger(namespace: str, settings: Any) -> Ledger:
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "QUEUES": {"default": {}, "emails": {}, "reports": {"GROUPS": ["ops"]}},
    }
    return get_ledger("default")


def record_url(
    request_id: str, queue: str = "default", model: str = "record", view: str = "change"
) -> str:
    return reverse(f"admin:django_ledger_{model}_{view}", args=(quote(f"{queue} {request_id}"),))


def act(model: str, name: str) -> str:
    return reverse(f"admin:django_ledger_{model}_act", args=(name,))


def listed(response: Any) -> list[str]:
    assert response.status_code == 200, response.status_code
    return ROW.findall(response.content.decode())


def buttons(response: Any) -> list[str]:
    assert response.status_code == 200, response.status_code
    return re.findall(r'data-action="(\w+)"', response.content.decode())


def pages(admin_ledger: Ledger) -> list[tuple[str, str]]:
    """Every page of the ledger admin, as (method, url)."""
    return [
        ("get", RECORDS),
        ("get", record_url("a")),
        ("get", act("record", "retry") + "?key=default+a"),
        ("post", act("record", "retry")),
        ("get", QUARANTINE),
        ("get", record_url("a", model="quarantinedrecord")),
        ("post", act("quarantinedrecord", "discard")),
        ("get", QUEUES),
        ("get", QUEUES + "default/change/"),
        ("get", QUEUES + "default/gate/close/"),
        ("post", QUEUES + "default/gate/close/"),
    ]


def test_the_models_declare_exactly_the_permissions_in_use() -> None:
    codenames = set(
        Permission.objects.filter(content_type__app_label="django_ledger").values_list(
            "codename", flat=True
        )
    )
    assert codenames == {*ALL, "admit_record", "claim_record"}


@pytest.mark.parametrize("staff", [False, True], ids=["anonymous", "non-staff"])
def test_anyone_but_staff_is_sent_to_the_login_page(
    admin_ledger: Ledger, login_as: Callable[..., Client], staff: bool
) -> None:
    admin_ledger.admit("a", "x")
    client = login_as(*ALL, staff=False) if staff else Client()
    for method, url in pages(admin_ledger):
        response = getattr(client, method)(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/"), url
    assert not admin_ledger.gate_closed


def test_staff_without_permissions_is_refused(
    admin_ledger: Ledger, login_as: Callable[..., Client]
) -> None:
    admin_ledger.admit("a", "x")
    client = login_as()
    for method, url in pages(admin_ledger):
        assert getattr(client, method)(url).status_code == 403, url
    assert "django_ledger" not in client.get("/admin/").content.decode()


def test_view_permission_shows_records_and_no_action(
    admin_ledger: Ledger, login_as: Callable[..., Client]
) -> None:
    admin_ledger.admit("a", "x")
    client = login_as("view_record")
    assert listed(client.get(RECORDS)) == ["a"]
    assert 'name="action"' not in client.get(RECORDS).content.decode()
    assert buttons(client.get(record_url("a"))) == []
    assert client.get(act("record", "retry"), {"key": "default a"}).status_code == 403
    response = client.post(act("record", "fail"), {"item": ["0" * 32 + " default a"]})
    assert response.status_code == 403
    record = admin_ledger.resolve("a")
    assert record is not None and record.state is State.PENDING
    assert client.get(QUARANTINE).status_code == 403
    assert client.get(QUEUES).status_code == 403


def test_each_action_needs_its_own_permission(
    admin_ledger: Ledger, login_as: Callable[..., Client]
) -> None:
    admin_ledger.admit("a", "x")
    client = login_as("view_record", "retry_record")
    assert buttons(client.get(record_url("a"))) == ["retry"]
    text = client.get(RECORDS).content.decode()
    assert 'value="retry_selected"' in text
    assert 'value="fail_selected"' not in text and 'value="purge_selected"' not in text
    assert client.get(act("record", "fail"), {"key": "default a"}).status_code == 403
    # The list action of another permission, posted anyway, does nothing.
    client.post(
        RECORDS, {"action": "fail_selected", "_selected_action": ["default a"], "index": "0"}
    )
    record = admin_ledger.resolve("a")
    assert record is not None and record.state is State.PENDING
    page = client.get(act("record", "retry"), {"key": "default a"})
    assert page.status_code == 200
    item = re.search(r'name="item" value="([^"]*)"', page.content.decode())
    assert item is not None
    client.post(act("record", "retry"), {"item": [item.group(1)]})
    record = admin_ledger.resolve("a")
    assert record is not None and record.due_at <= admin_ledger.server_time_ms()


def test_a_queue_limited_to_a_group_is_out_of_reach_by_url(
    admin_ledger: Ledger, login_as: Callable[..., Client], redis_client: redis.Redis
) -> None:
    reports = get_ledger("reports")
    admin_ledger.admit("a", "x")
    reports.admit("secret", "x")
    redis_client.hset(reports.records_key, "bad", b"garbage")
    reports.repair_records([("bad", b"garbage")])
    client = login_as(*ALL)
    assert listed(client.get(RECORDS)) == ["a"]
    assert listed(client.get(RECORDS, {"q": "secret"})) == []
    filtered = client.get(RECORDS, {"queue": "reports"})
    assert filtered.status_code == 302 and filtered["Location"].endswith("?e=1")
    assert client.get(record_url("secret", "reports")).status_code == 302
    assert client.get(act("record", "retry"), {"key": "reports secret"}).status_code == 403
    post = client.post(act("record", "fail"), {"item": ["0" * 32 + " reports secret"]})
    assert post.status_code == 403
    assert listed(client.get(QUARANTINE)) == []
    assert client.get(record_url("bad", "reports", model="quarantinedrecord")).status_code == 302
    assert (
        client.post(
            act("quarantinedrecord", "discard"), {"item": ["0" * 32 + " reports bad"]}
        ).status_code
        == 403
    )
    text = client.get(QUEUES).content.decode()
    assert ">default</a>" in text and ">reports</a>" not in text
    assert client.get(QUEUES + "reports/change/").status_code == 302
    assert client.post(QUEUES + "reports/gate/close/").status_code == 403
    assert not reports.gate_closed
    record = reports.resolve("secret")
    assert record is not None and record.state is State.PENDING
    # In the group, the queue is there.
    member = login_as(*ALL, groups=("ops",))
    assert listed(member.get(RECORDS, {"queue": "reports"})) == ["secret"]
    assert member.get(record_url("secret", "reports")).status_code == 200
    assert listed(member.get(QUARANTINE)) == ["bad"]


def test_the_gate_needs_operate_queue(
    admin_ledger: Ledger, login_as: Callable[..., Client]
) -> None:
    viewer = login_as("view_queue")
    text = viewer.get(QUEUES + "default/change/").content.decode()
    assert 'id="gate-button"' not in text
    assert viewer.get(QUEUES + "default/gate/close/").status_code == 403
    assert viewer.post(QUEUES + "default/gate/close/").status_code == 403
    assert not admin_ledger.gate_closed
    operator = login_as("view_queue", "operate_queue")
    assert 'id="gate-button"' in operator.get(QUEUES + "default/change/").content.decode()
    assert operator.post(QUEUES + "default/gate/close/").status_code == 302
    assert admin_ledger.gate_closed


def test_quarantine_actions_need_their_permissions(
    admin_ledger: Ledger, login_as: Callable[..., Client], redis_client: redis.Redis
) -> None:
    redis_client.hset(admin_ledger.records_key, "bad", b"garbage")
    admin_ledger.repair_records([("bad", b"garbage")])
    viewer = login_as("view_quarantinedrecord")
    assert listed(viewer.get(QUARANTINE)) == ["bad"]
    assert buttons(viewer.get(record_url("bad", model="quarantinedrecord"))) == []
    assert (
        viewer.get(act("quarantinedrecord", "discard"), {"key": "default bad"}).status_code == 403
    )
    discarder = login_as("view_quarantinedrecord", "discard_quarantinedrecord")
    assert buttons(discarder.get(record_url("bad", model="quarantinedrecord"))) == ["discard"]
    # The records admin knows nothing of the quarantine's actions.
    assert discarder.get(act("record", "discard")).status_code == 404


def test_queue_health_hides_what_the_user_may_not_see(
    admin_ledger: Ledger, login_as: Callable[..., Client]
) -> None:
    admin_ledger.admit("a", "x")
    text = login_as("view_queue").get(QUEUES + "default/change/").content.decode()
    assert (
        "due now</a>" not in text and ">Records</a>" not in text and ">Quarantine</a>" not in text
    )
    text = (
        login_as("view_queue", "view_record", "view_quarantinedrecord")
        .get(QUEUES + "default/change/")
        .content.decode()
    )
    assert "due now</a>" in text and ">Records</a>" in text and ">Quarantine</a>" in text


def test_the_admin_docs_list_every_model_and_permission() -> None:
    from pathlib import Path

    from django.apps import apps

    text = (Path(__file__).resolve().parents[2] / "docs" / "admin.md").read_text()
    for model in apps.get_app_config("django_ledger").get_models():
        assert f"`{model.__name__}`" in text, model.__name__
        meta = model._meta
        codenames = [f"{action}_{meta.model_name}" for action in meta.default_permissions]
        codenames += [codename for codename, _ in meta.permissions]
        for codename in codenames:
            assert f"`{codename}`" in text, codename
