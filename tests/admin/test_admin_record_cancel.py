"""Cancel from a record's page, and "Mark failed" of a running record, with Django's client.

Both take the one cancel path: a running record ends FAILED under a new fence, its
worker is told (the queue's cancels stream names the run), and the run's settlement is
refused; the message says so. The Cancel button needs ``operate_queue``, as the API's
cancel does.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from django_ledger import State
from django_ledger.core.ledger import Ledger
from django_ledger.core.results import SettlementStatus
from tests.admin.test_admin_records import ITEM, action_link, confirm, detail_url, messages_of

pytestmark = pytest.mark.django_db


def act(client: Client, name: str, request_id: str) -> Any:
    form = confirm(client, action_link(client, request_id, name))
    return client.post(reverse("admin:django_ledger_record_act", args=(name,)), form, follow=True)


def told(ledger: Ledger) -> list[dict[bytes, bytes]]:
    """The cancels the queue's workers hear (its cancels stream)."""
    return [fields for _, fields in ledger.redis.xrange(ledger.runner.keys.cancels)]


@pytest.mark.parametrize(
    ("action", "reason"),
    [("cancel", b"cancelled from the admin"), ("fail", b"marked failed from the admin")],
)
def test_a_running_record_is_cancelled_and_its_worker_told(
    admin_client: Client, admin_ledger: Ledger, action: str, reason: bytes
) -> None:
    admin_ledger.admit("job", "x")
    claim = admin_ledger.claim("w-1", lease=600)
    assert claim is not None
    response = act(admin_client, action, "job")
    said = messages_of(response)
    assert any(
        "Record job was running: it ended FAILED now, its worker is told to stop the task" in m
        for m in said
    ), said
    record = admin_ledger.resolve("job")
    assert record is not None and record.state is State.FAILED and record.fence > claim.fence
    [notice] = told(admin_ledger)
    assert (notice[b"id"], notice[b"owner"], int(notice[b"fence"])) == (b"job", b"w-1", claim.fence)
    assert (notice[b"by"], notice[b"reason"]) == (b"admin", reason)
    # The run's late settlement is refused: the record stays as the cancel left it.
    assert admin_ledger.settle(claim).status is SettlementStatus.LOST
    [result] = admin_ledger.results(["job"])
    assert result is not None and b"django_ledger.tasks.Cancelled: cancelled by admin" in result


def test_cancel_of_a_waiting_record_says_it_never_runs(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit("later", "x", delay=3600)
    said = messages_of(act(admin_client, "cancel", "later"))
    assert "Record later had not started: it ended FAILED and will never run." in said
    assert "Cancelled: 1 record." in said
    record = admin_ledger.resolve("later")
    assert record is not None and record.state is State.FAILED
    assert told(admin_ledger) == []  # nothing ran: no worker to tell
    text = admin_client.get(detail_url("later")).content.decode()
    assert 'data-action="cancel"' not in text  # ended: no longer offered


def test_mark_failed_of_a_waiting_record_stays_a_plain_fail(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit("job", "x")
    said = messages_of(act(admin_client, "fail", "job"))
    assert said == ["Marked FAILED: 1 record."]
    record = admin_ledger.resolve("job")
    assert record is not None and record.state is State.FAILED


def test_the_cancel_button_needs_operate_queue(
    admin_ledger: Ledger, django_user_model: Any
) -> None:
    admin_ledger.admit("job", "x")

    def client_with(*codenames: str) -> Client:
        user = django_user_model(username="-".join(codenames), is_staff=True)
        user.set_unusable_password()
        user.save()
        user.user_permissions.add(
            *Permission.objects.filter(
                content_type__app_label="django_ledger", codename__in=codenames
            )
        )
        client = Client()
        client.force_login(user)
        return client

    url = reverse("admin:django_ledger_record_act", args=("cancel",))
    failer = client_with("view_record", "fail_record")
    page = failer.get(detail_url("job")).content.decode()
    assert re.findall(r'data-action="(\w+)"', page) == ["fail"]
    assert failer.get(url, {"key": "default job"}).status_code == 403
    assert failer.post(url, {"item": ["x default job"]}).status_code == 403
    record = admin_ledger.resolve("job")
    assert record is not None and record.state is State.PENDING
    operator = client_with("view_record", "operate_queue")
    page = operator.get(detail_url("job")).content.decode()
    assert re.findall(r'data-action="(\w+)"', page) == ["cancel"]
    said = messages_of(act(operator, "cancel", "job"))
    assert "Cancelled: 1 record." in said


def test_mark_failed_over_a_selection_cancels_the_running_ones(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit_many([("a", "x"), ("b", "x")])
    claim = admin_ledger.claim("w-1", lease=600)
    assert claim is not None
    page = admin_client.post(
        reverse("admin:django_ledger_record_changelist"),
        {"action": "fail_selected", "_selected_action": ["default a", "default b"], "index": "0"},
    )
    text = page.content.decode()
    assert "for those running, their workers are told to stop the tasks" in text
    items = [html.unescape(item) for item in ITEM.findall(text)]
    response = admin_client.post(
        reverse("admin:django_ledger_record_act", args=("fail",)),
        {"item": items, "next": ""},
        follow=True,
    )
    said = messages_of(response)
    assert f"Record {claim.request_id} was running: it ended FAILED now" in " ".join(said)
    assert "Marked FAILED: 2 records." in said
    assert len(told(admin_ledger)) == 1  # the running one's worker, alone, is told
    assert admin_ledger.settle(claim).status is SettlementStatus.LOST
