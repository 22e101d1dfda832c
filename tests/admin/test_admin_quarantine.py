"""The quarantine admin with Django's test client: list, raw bytes shown safely, discard, restore."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import redis
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from django_ledger import Record, State
from django_ledger.conf import get_ledger
from django_ledger.core.ledger import Ledger
from django_ledger.core.records import encode_record

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/django_ledger/quarantinedrecord/"
ROW = re.compile(r'<th class="field-request_id"><a href="[^"]*">([^<]*)</a></th>')
ITEM = re.compile(r'name="item" value="([^"]*)"')
NEXT = re.compile(r'name="next" value="([^"]*)"')
GARBAGE = b"\x00\x01<script>alert('x')</script>\\\xfe\xff"


def quarantine(
    admin_ledger: Ledger, redis_client: redis.Redis, request_id: str, raw: bytes = GARBAGE
) -> None:
    """Store corrupt bytes under ``request_id`` and let repair set them aside."""
    redis_client.hset(admin_ledger.records_key, request_id, raw)
    report = admin_ledger.repair_records([(request_id, raw)])
    assert report.quarantined == 1


def listed(response: Any) -> list[str]:
    assert response.status_code == 200, response.status_code
    return [html.unescape(name) for name in ROW.findall(response.content.decode())]


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def detail_url(request_id: str, queue: str = "default") -> str:
    return reverse(
        "admin:django_ledger_quarantinedrecord_change", args=(quote(f"{queue} {request_id}"),)
    )


def act_url(name: str) -> str:
    return reverse("admin:django_ledger_quarantinedrecord_act", args=(name,))


def confirm_link(client: Client, request_id: str, name: str) -> dict[str, Any]:
    """Follow a detail page's action button to its confirmation page; return its form."""
    page = client.get(detail_url(request_id)).content.decode()
    match = re.search(rf'href="([^"]*)" data-action="{name}"', page)
    assert match, f"no {name} button"
    text = client.get(html.unescape(match.group(1))).content.decode()
    return {
        "item": [html.unescape(item) for item in ITEM.findall(text)],
        "next": html.unescape(NEXT.search(text).group(1)),  # type: ignore[union-attr]
    }


def test_list_shows_id_size_escaped_bytes_and_reason(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    quarantine(admin_ledger, redis_client, "bad-1")
    quarantine(admin_ledger, redis_client, "bad-2", b"1" + b"0" * 80)
    admin_ledger.admit("fine", "x")
    page = admin_client.get(CHANGELIST)
    assert sorted(listed(page)) == ["bad-1", "bad-2"]
    text = page.content.decode()
    assert f'<td class="field-size">{len(GARBAGE)}</td>' in text
    assert "\\x00\\x01&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;\\\\\\xfe\\xff" in text
    assert "<script>alert" not in text
    assert "1" + "0" * 59 + "…" in text  # the list shows 60 bytes at most
    assert 'class="field-error"' in text


def test_search_and_queue_filter(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    quarantine(admin_ledger, redis_client, "bad-1")
    quarantine(admin_ledger, redis_client, "bad-2")
    emails = get_ledger("emails")
    quarantine(emails, redis_client, "bad-1")
    assert listed(admin_client.get(CHANGELIST, {"q": "bad-1"})) == ["bad-1", "bad-1"]
    assert listed(admin_client.get(CHANGELIST, {"q": "bad-1", "queue": "emails"})) == ["bad-1"]
    assert listed(admin_client.get(CHANGELIST, {"q": "fine"})) == []
    assert sorted(listed(admin_client.get(CHANGELIST, {"queue": "default"}))) == ["bad-1", "bad-2"]


def test_pages_of_a_large_quarantine(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    ids = [f"bad-{i:03d}" for i in range(120)]
    for request_id in ids:
        redis_client.hset(admin_ledger.records_key, request_id, GARBAGE)
    report = admin_ledger.repair_records([(request_id, GARBAGE) for request_id in ids])
    assert report.quarantined == 120
    pages = [listed(admin_client.get(CHANGELIST, {"p": p})) for p in (1, 2, 3)]
    assert [len(page) for page in pages] == [50, 50, 20]
    assert sorted(name for page in pages for name in page) == ids


@pytest.mark.parametrize("params", [{"state": "PENDING"}, {"due_at__gte": "0"}, {"queue": "nope"}])
def test_a_bad_filter_gets_the_admin_error_page(
    admin_client: Client, admin_ledger: Ledger, params: dict[str, str]
) -> None:
    response = admin_client.get(CHANGELIST, params)
    assert response.status_code == 302 and response["Location"].endswith("?e=1")


def test_detail_shows_bytes_safely_and_why_they_fail(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    quarantine(admin_ledger, redis_client, "bad")
    text = admin_client.get(detail_url("bad")).content.decode()
    assert f"{len(GARBAGE)} bytes" in text
    assert "unknown encoding version" in text or "malformed" in text or "checksum" in text
    assert "\\x00\\x01&lt;script&gt;" in text and "<script>alert" not in text
    assert "the same bytes" in text
    assert "Show all" not in text
    # The record page of the same id says it is quarantined.
    record_page = admin_client.get(
        reverse("admin:django_ledger_record_change", args=(quote("default bad"),))
    ).content.decode()
    assert "This id is quarantined" in record_page


def test_long_bytes_are_cut_with_a_way_to_see_all(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    raw = b"9" * 10_000 + b"<end>"
    quarantine(admin_ledger, redis_client, "long", raw)
    text = admin_client.get(detail_url("long")).content.decode()
    assert "Show all 10005 bytes" in text
    assert "&lt;end&gt;" not in text
    full = admin_client.get(detail_url("long"), {"full": "1"}).content.decode()
    assert "9" * 10_000 + "&lt;end&gt;" in full


@pytest.mark.parametrize("request_id", ["never-seen", "fine"])
def test_an_id_not_in_quarantine_is_not_found(
    admin_client: Client, admin_ledger: Ledger, request_id: str
) -> None:
    admin_ledger.admit("fine", "x")
    response = admin_client.get(detail_url(request_id), follow=True)
    assert response.redirect_chain[-1][0] == CHANGELIST
    assert any("it may have been removed" in message for message in messages_of(response))


def test_discard_forgets_bytes_and_id(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    quarantine(admin_ledger, redis_client, "bad")
    form = confirm_link(admin_client, "bad", "discard")
    response = admin_client.post(act_url("discard"), form, follow=True)
    assert response.redirect_chain[-1][0] == CHANGELIST
    assert "Discarded: 1 record." in messages_of(response)
    assert redis_client.hget(admin_ledger.quarantine_key, "bad") is None
    assert redis_client.hget(admin_ledger.records_key, "bad") is None
    assert admin_ledger.admit("bad", "again").status.value == "ADMITTED"
    assert LogEntry.objects.filter(
        object_id="default bad", change_message__startswith="Discarded"
    ).exists()


def test_restore_waits_until_the_bytes_decode(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    quarantine(admin_ledger, redis_client, "bad")
    text = admin_client.get(detail_url("bad")).content.decode()
    assert 'data-action="restore"' not in text
    assert "still do not decode" in text
    # Someone writes good bytes back (from a backup, say): now it can be restored.
    now = admin_ledger.server_time_ms()
    good = Record("bad", '{"n": 1}', State.PENDING, now, created_at=now, updated_at=now)
    redis_client.hset(admin_ledger.records_key, "bad", encode_record(good))
    text = admin_client.get(detail_url("bad")).content.decode()
    assert "other bytes" in text and "see the record" in text
    form = confirm_link(admin_client, "bad", "restore")
    response = admin_client.post(act_url("restore"), form, follow=True)
    assert "Restored: 1 record." in messages_of(response)
    assert redis_client.hget(admin_ledger.quarantine_key, "bad") is None
    claim = admin_ledger.claim("w", lease=60)
    assert claim is not None and claim.request_id == "bad" and claim.payload == '{"n": 1}'


def test_an_action_on_bytes_that_changed_is_refused(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    quarantine(admin_ledger, redis_client, "bad")
    form = confirm_link(admin_client, "bad", "discard")
    redis_client.hset(admin_ledger.records_key, "bad", GARBAGE + b"!")  # changed after the page
    response = admin_client.post(act_url("discard"), form, follow=True)
    assert any("changed since it was shown" in message for message in messages_of(response))
    assert redis_client.hget(admin_ledger.quarantine_key, "bad") == GARBAGE
    assert redis_client.hget(admin_ledger.records_key, "bad") == GARBAGE + b"!"


def test_bulk_discard_from_the_list(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    for request_id in ("bad-1", "bad-2", "bad-3"):
        quarantine(admin_ledger, redis_client, request_id)
    page = admin_client.post(
        CHANGELIST,
        {
            "action": "discard_selected",
            "_selected_action": ["default bad-1", "default bad-3"],
            "index": "0",
        },
    )
    text = page.content.decode()
    assert "Discard: are you sure?" in text
    form = {
        "item": [html.unescape(item) for item in ITEM.findall(text)],
        "next": html.unescape(NEXT.search(text).group(1)),  # type: ignore[union-attr]
    }
    response = admin_client.post(act_url("discard"), form, follow=True)
    assert "Discarded: 2 records." in messages_of(response)
    assert listed(admin_client.get(CHANGELIST)) == ["bad-2"]


def test_restore_is_refused_when_the_id_is_no_longer_quarantined(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    admin_ledger.admit("fine", "x")
    response = admin_client.get(act_url("restore"), {"key": "default fine"}, follow=True)
    assert any("it is no longer quarantined" in message for message in messages_of(response))
