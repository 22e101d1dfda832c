"""The records admin's actions with Django's test client: retry now, mark failed, purge.

From a record's page or over a selection of the list, each behind a confirmation page:
a record that changed since, a stale link, a record that is gone and a selection too
large are refused with a message; purge takes ended records only.
"""

from __future__ import annotations

import html

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse

from django_ledger import State
from django_ledger.core.ledger import Ledger
from tests.admin.test_admin_records import (
    CHANGELIST,
    ITEM,
    NEXT,
    action_link,
    confirm,
    detail_url,
    messages_of,
)

pytestmark = pytest.mark.django_db


def test_retry_now_from_the_record_page(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit("job", "x", delay=3600)
    claim = admin_ledger.claim("w", lease=600)
    assert claim is None  # not due yet: retry makes it due now
    form = confirm(admin_client, action_link(admin_client, "job", "retry"))
    assert len(form["item"]) == 1
    response = admin_client.post(
        reverse("admin:django_ledger_record_act", args=("retry",)), form, follow=True
    )
    assert response.redirect_chain[-1][0] == detail_url("job")
    assert "Retried now: 1 record." in messages_of(response)
    record = admin_ledger.resolve("job")
    assert record is not None and record.state is State.PENDING
    assert record.due_at <= admin_ledger.server_time_ms()
    assert admin_ledger.claim("w", lease=60) is not None
    entry = LogEntry.objects.get(object_id="default job")
    assert entry.change_message.startswith("Retried now")
    history = admin_client.get(detail_url("job").replace("/change/", "/history/"))
    assert "Retried now" in history.content.decode()


def test_an_action_on_a_record_that_changed_is_refused(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit("job", "x")
    form = confirm(admin_client, action_link(admin_client, "job", "fail"))
    claim = admin_ledger.claim("w", lease=600)  # a worker takes it after the page was shown
    assert claim is not None
    response = admin_client.post(
        reverse("admin:django_ledger_record_act", args=("fail",)), form, follow=True
    )
    assert any("changed since it was shown" in message for message in messages_of(response))
    record = admin_ledger.resolve("job")
    assert record is not None and record.state is State.CLAIMED
    assert admin_ledger.settle(claim).ok


def test_a_stale_link_is_refused_before_confirmation(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit("job", "x")
    link = action_link(admin_client, "job", "retry")
    admin_ledger.claim("w", lease=600)
    response = admin_client.get(link, follow=True)
    assert any("changed since it was shown" in message for message in messages_of(response))
    assert response.redirect_chain[-1][0] == detail_url("job")


def test_mark_failed_then_it_is_no_longer_offered(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit("job", "x")
    form = confirm(admin_client, action_link(admin_client, "job", "fail"))
    admin_client.post(reverse("admin:django_ledger_record_act", args=("fail",)), form)
    record = admin_ledger.resolve("job")
    assert record is not None and record.state is State.FAILED
    text = admin_client.get(detail_url("job")).content.decode()
    assert 'data-action="fail"' not in text
    assert "it has already ended as FAILED" in text
    # Asking anyway, by URL, is refused with the reason.
    url = reverse("admin:django_ledger_record_act", args=("fail",))
    response = admin_client.get(url, {"key": "default job"}, follow=True)
    assert any("already ended as FAILED" in message for message in messages_of(response))


def test_purge_takes_ended_records_only(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit_many([("done", "x"), ("waiting", "x")])
    claim = admin_ledger.claim("w", lease=60)
    assert claim is not None
    admin_ledger.settle(claim, State.COMPLETED)
    assert 'data-action="purge"' not in admin_client.get(detail_url("waiting")).content.decode()
    form = confirm(admin_client, action_link(admin_client, "done", "purge"))
    response = admin_client.post(
        reverse("admin:django_ledger_record_act", args=("purge",)), form, follow=True
    )
    assert response.redirect_chain[-1][0] == CHANGELIST
    assert "Purged: 1 record." in messages_of(response)
    assert admin_ledger.resolve("done") is None
    assert admin_ledger.admit("done", "again").status.value == "ADMITTED"


def test_bulk_retry_from_the_list(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit_many([("a", "x"), ("b", "x"), ("c", "x")])
    admin_ledger.claim_many("w", 3, lease=600)
    page = admin_client.post(
        CHANGELIST + "?state=CLAIMED",
        {"action": "retry_selected", "_selected_action": ["default a", "default b"], "index": "0"},
    )
    assert page.status_code == 200
    text = page.content.decode()
    assert "Retry now: are you sure?" in text
    form = {
        "item": [html.unescape(item) for item in ITEM.findall(text)],
        "next": html.unescape(NEXT.search(text).group(1)),  # type: ignore[union-attr]
    }
    assert sorted(item.split(" ", 1)[1] for item in form["item"]) == ["default a", "default b"]
    response = admin_client.post(
        reverse("admin:django_ledger_record_act", args=("retry",)), form, follow=True
    )
    assert response.redirect_chain[-1][0] == CHANGELIST + "?state=CLAIMED"
    assert "Retried now: 2 records." in messages_of(response)
    states = {r.request_id: r.state for r in admin_ledger.resolve_many(["a", "b", "c"]) if r}
    assert states == {"a": State.PENDING, "b": State.PENDING, "c": State.CLAIMED}


def test_bulk_purge_skips_records_that_have_not_ended(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit_many([("done", "x"), ("waiting", "x")])
    claim = admin_ledger.claim("w", lease=60)
    assert claim is not None
    admin_ledger.settle(claim, State.COMPLETED)
    page = admin_client.post(
        CHANGELIST,
        {
            "action": "purge_selected",
            "_selected_action": ["default done", "default waiting"],
            "index": "0",
        },
    )
    text = page.content.decode()
    assert "skipped: it is PENDING: only ended records can be purged" in text
    assert [item.split(" ", 1)[1] for item in ITEM.findall(text)] == ["default done"]


def test_bulk_action_over_too_many_records_is_refused(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit_many([(f"r{i:03d}", "x") for i in range(150)])
    response = admin_client.post(
        CHANGELIST,
        {
            "action": "fail_selected",
            "_selected_action": ["default r000"],
            "select_across": "1",
            "index": "0",
        },
        follow=True,
    )
    assert any("select at most 100 records" in message for message in messages_of(response))
    record = admin_ledger.resolve("r000")
    assert record is not None and record.state is State.PENDING


def test_acting_on_a_missing_record_says_so(admin_client: Client, admin_ledger: Ledger) -> None:
    url = reverse("admin:django_ledger_record_act", args=("retry",))
    response = admin_client.get(url, {"key": "default ghost"}, follow=True)
    assert any("it no longer exists" in message for message in messages_of(response))
    response = admin_client.post(url, {"item": ["0" * 32 + " default ghost"]}, follow=True)
    assert any("no longer exists" in message for message in messages_of(response))
    assert (
        admin_client.get(reverse("admin:django_ledger_record_act", args=("explode",))).status_code
        == 404
    )
