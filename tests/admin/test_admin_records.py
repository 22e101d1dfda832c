"""The records admin with Django's test client: list, filters, search, pages, detail.

Its actions (retry, mark failed, purge, one record or many) are
``test_admin_record_actions.py``'s.
"""

from __future__ import annotations

import html
import re
import warnings
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from django_ledger import State
from django_ledger.conf import get_ledger, ledger_settings, reset_connections
from django_ledger.core.ledger import Ledger
from tests.support.ledger_helpers import count_calls
from tests.support.redis_server import free_port

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/django_ledger/record/"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
ROW = re.compile(r'<th class="field-request_id"><a href="[^"]*">([^<]*)</a></th>')
ITEM = re.compile(r'name="item" value="([^"]*)"')
NEXT = re.compile(r'name="next" value="([^"]*)"')
HOUR = 3_600_000


@pytest.fixture
def admin_env(namespace: str, settings: Any) -> str:
    """Point the LEDGER setting at the test's own namespace."""
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace}
    return namespace


@pytest.fixture
def admin_ledger(admin_env: str) -> Ledger:
    return get_ledger("default")


def listed(response: Any) -> list[str]:
    assert response.status_code == 200, response.status_code
    return [html.unescape(name) for name in ROW.findall(response.content.decode())]


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def detail_url(request_id: str, queue: str = "default") -> str:
    return reverse("admin:django_ledger_record_change", args=(quote(f"{queue} {request_id}"),))


def bounds(lookup: str, low_ms: int | None, high_ms: int | None) -> dict[str, str]:
    """Query parameters of a rangefilter date-time range (UTC, as the test project)."""
    params = {}
    for suffix, ms in (("gte", low_ms), ("lte", high_ms)):
        if ms is not None:
            moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
            params[f"{lookup}__range__{suffix}_0"] = moment.strftime("%Y-%m-%d")
            params[f"{lookup}__range__{suffix}_1"] = moment.strftime("%H:%M:%S")
    return params


def confirm(client: Client, url: str) -> dict[str, Any]:
    """Open a confirmation page and return the form it would post."""
    page = client.get(url)
    assert page.status_code == 200, page.status_code
    text = page.content.decode()
    return {
        "item": [html.unescape(item) for item in ITEM.findall(text)],
        "next": html.unescape(NEXT.search(text).group(1)),  # type: ignore[union-attr]
    }


def action_link(client: Client, request_id: str, name: str) -> str:
    page = client.get(detail_url(request_id)).content.decode()
    match = re.search(rf'href="([^"]*)" data-action="{name}"', page)
    assert match, f"no {name} button"
    return html.unescape(match.group(1))


# -- the list ---------------------------------------------------------------------------


def test_list_shows_every_column(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit_many([("a", "1"), ("b", "2")], traceparent=TRACEPARENT)
    claim = admin_ledger.claim("worker-7", lease=600)
    assert claim is not None
    page = admin_client.get(CHANGELIST)
    assert sorted(listed(page)) == ["a", "b"]
    text = page.content.decode()
    for column in (
        "Request id",
        "Queue",
        "State",
        "Due at",
        "Owner",
        "Attempts",
        "Fence",
        "Lease until",
        "Updated at",
    ):
        assert column in text
    row = re.search(
        rf"<th class=\"field-request_id\"><a [^>]*>{claim.request_id}</a></th>(.*?)</tr>", text
    )
    assert row is not None
    cells = re.findall(r'<td class="field-(\w+)">([^<]*)</td>', row.group(1))
    values = dict(cells)
    assert values["queue"] == "default"
    assert values["record_state"] == "CLAIMED"
    assert values["owner"] == "worker-7"
    assert values["attempts"] == "1" and values["fence"] == str(claim.fence)
    assert values["lease"] != "-"


def test_pages_follow_due_order_deep_pages_included(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    ids = [f"r{i:03d}" for i in range(250)]
    for i, request_id in enumerate(ids):
        admin_ledger.admit(request_id, "x", delay=i)
    assert listed(admin_client.get(CHANGELIST)) == ids[:100]
    assert listed(admin_client.get(CHANGELIST, {"p": 3})) == ids[200:]
    # Sorting by the due column, descending: the index read from its top.
    assert listed(admin_client.get(CHANGELIST, {"o": "-4"})) == ids[::-1][:100]
    assert listed(admin_client.get(CHANGELIST, {"o": "-4", "p": 3})) == ids[::-1][200:]


def test_a_page_costs_a_handful_of_redis_calls(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    ids = [f"r{i:04d}" for i in range(1000)]
    admin_ledger.admit_many([(request_id, "x" * 100) for request_id in ids])
    later = [f"later{i}" for i in range(10)]
    admin_ledger.admit_many([(request_id, "x") for request_id in later], delay=3600)
    now = admin_ledger.server_time_ms()
    queues = len(ledger_settings.queue_names)
    # Each query with exactly the rows it must list, the script calls it may cost (a
    # count per configured queue, and one page read; a search looks in each queue once)
    # and the most record reads those scripts may make (one per row shown, or per queue).
    pages: list[tuple[dict[str, str], list[str], int, int]] = [
        ({}, ids[:100], queues + 1, 100),
        ({"p": "8"}, ids[700:800], queues + 1, 100),
        ({"q": "r0500"}, ["r0500"], queues, queues),
        (bounds("due_at", now + HOUR // 2, now + 2 * HOUR), later, queues + 1, 10),
    ]
    for params, rows, script_calls, most_reads in pages:
        admin_client.get(CHANGELIST, params)  # its scripts loaded, the session warm
        with count_calls(redis_client) as calls:
            shown = listed(admin_client.get(CHANGELIST, params))
        assert shown == rows, params
        # Counted on the server: the round trips are the script calls, never one per
        # record, and no record is read twice.
        assert calls.fcall == script_calls, (params, calls.by_command)
        reads = calls.by_command.get("hget", 0) + calls.by_command.get("hmget", 0)
        assert reads <= most_reads, (params, calls.by_command)


def test_records_are_grouped_by_queue_then_state(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit_many([("p1", "x"), ("p2", "x")])
    admin_ledger.claim("w", lease=60)
    get_ledger("emails").admit("e1", "x")
    assert listed(admin_client.get(CHANGELIST)) == ["p2", "p1", "e1"]


def test_filter_by_state_and_queue(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit_many([("p1", "x"), ("p2", "x"), ("p3", "x")])
    claim = admin_ledger.claim("w", lease=60)
    assert claim is not None
    admin_ledger.settle(claim, State.COMPLETED)
    admin_ledger.claim("w", lease=60)
    get_ledger("emails").admit("e1", "x")
    assert listed(admin_client.get(CHANGELIST, {"state": "COMPLETED"})) == ["p1"]
    assert listed(admin_client.get(CHANGELIST, {"state": "CLAIMED"})) == ["p2"]
    assert listed(admin_client.get(CHANGELIST, {"state": "PENDING"})) == ["p3", "e1"]
    assert listed(admin_client.get(CHANGELIST, {"queue": "emails"})) == ["e1"]
    assert listed(admin_client.get(CHANGELIST, {"queue": "emails", "state": "CLAIMED"})) == []


def test_due_time_range(admin_client: Client, admin_ledger: Ledger) -> None:
    for i, request_id in enumerate(["now", "in-1h", "in-2h", "in-3h"]):
        admin_ledger.admit(request_id, "x", delay=i * 3600)
    now = admin_ledger.server_time_ms()
    params = bounds("due_at", now + HOUR // 2, now + 5 * HOUR // 2)
    assert listed(admin_client.get(CHANGELIST, params)) == ["in-1h", "in-2h"]
    # One bound alone, and descending.
    assert listed(
        admin_client.get(CHANGELIST, {**bounds("due_at", now + HOUR // 2, None), "o": "-4"})
    ) == [
        "in-3h",
        "in-2h",
        "in-1h",
    ]


def test_a_date_without_a_time_is_the_whole_day(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit("today", "x")
    today = datetime.fromtimestamp(admin_ledger.server_time_ms() / 1000, tz=UTC).strftime(
        "%Y-%m-%d"
    )
    params = {"due_at__range__gte_0": today, "due_at__range__lte_0": today}
    assert listed(admin_client.get(CHANGELIST, params)) == ["today"]


def test_lease_expiry_range_lists_claimed_records(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit_many([("a", "x"), ("b", "x"), ("waiting", "x")])
    short = admin_ledger.claim("w", lease=600)
    long = admin_ledger.claim("w", lease=7200)
    assert short is not None and long is not None
    now = admin_ledger.server_time_ms()
    assert listed(admin_client.get(CHANGELIST, bounds("lease_until", None, now + HOUR))) == [
        short.request_id
    ]
    assert listed(admin_client.get(CHANGELIST, bounds("lease_until", now + HOUR, None))) == [
        long.request_id
    ]


def test_end_time_range_lists_ended_records(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit_many([("done", "x"), ("failed", "x"), ("waiting", "x")])
    done, failed = admin_ledger.claim_many("w", 2, lease=60)
    admin_ledger.settle(done, State.COMPLETED)
    admin_ledger.settle(failed, State.FAILED)
    now = admin_ledger.server_time_ms()
    assert listed(admin_client.get(CHANGELIST, bounds("updated_at", now - HOUR, now + HOUR))) == [
        "done",
        "failed",
    ]


def test_search_is_by_exact_request_id(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit_many([("order-17", "x"), ("order-170", "x")])
    get_ledger("emails").admit("order-17", "y")
    assert listed(admin_client.get(CHANGELIST, {"q": "order-17"})) == ["order-17", "order-17"]
    assert listed(admin_client.get(CHANGELIST, {"q": "order-17", "queue": "emails"})) == [
        "order-17"
    ]
    assert listed(admin_client.get(CHANGELIST, {"q": "order"})) == []
    assert listed(admin_client.get(CHANGELIST, {"q": "order-17", "state": "CLAIMED"})) == []


@pytest.mark.parametrize(
    "params",
    [
        {"state": "BOGUS"},
        {"queue": "no-such-queue"},
        {"due_at__range__gte_0": "not-a-date", "due_at__range__gte_1": "10:00:00"},
        {"lease_until__range__lte_0": "2024-01-01", "lease_until__range__lte_1": "25:99"},
        {"attempts": "3"},
        {"owner__contains": "w"},
        {"no_such_field": "1"},
        {"p": "999"},
    ],
    ids=lambda params: ",".join(params),
)
def test_a_bad_filter_value_gets_the_admin_error_page(
    admin_client: Client, admin_ledger: Ledger, params: dict[str, str]
) -> None:
    admin_ledger.admit_many([(f"r{i:03d}", "x") for i in range(101)])  # two pages
    response = admin_client.get(CHANGELIST, params)
    assert response.status_code == 302
    assert response["Location"].endswith("?e=1")
    followed = admin_client.get(response["Location"])
    assert followed.status_code == 200
    assert any("The list cannot show that" in message for message in messages_of(followed))


def test_nothing_to_add_change_or_delete(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit("a", "x")
    text = admin_client.get(CHANGELIST).content.decode()
    assert "delete_selected" not in text
    assert 'value="retry_selected"' in text and 'value="purge_selected"' in text
    assert admin_client.get(CHANGELIST + "add/").status_code == 403
    assert admin_client.get(detail_url("a").replace("/change/", "/delete/")).status_code == 403


def test_get_actions_takes_django_61s_action_location(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    from django.contrib import admin as django_admin

    from django_ledger.models import Record

    model_admin = django_admin.site.get_model_admin(Record)
    admin_ledger.admit("a", "x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert admin_client.get(CHANGELIST).status_code == 200
    request = admin_client.get(CHANGELIST).wsgi_request
    assert "delete_selected" not in model_admin.get_actions(request)
    assert "retry_selected" in model_admin.get_actions(request, action_location=None)


def test_redis_unavailable_gets_a_503_page(admin_client: Client, settings: Any) -> None:
    settings.LEDGER = {**settings.LEDGER, "CONNECTION": f"redis://127.0.0.1:{free_port()}/0"}
    reset_connections()
    try:
        for url in (CHANGELIST, detail_url("a"), "/admin/django_ledger/queue/"):
            response = admin_client.get(url)
            assert response.status_code == 503
            assert "could not read Redis" in response.content.decode()
    finally:
        reset_connections()


# -- the record page --------------------------------------------------------------------


def test_record_page_shows_every_field(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit(
        "order-1", '{"to": "ann@example.com", "items": [1, 2]}', traceparent=TRACEPARENT
    )
    admin_ledger.claim("worker-7", lease=600)
    text = admin_client.get(detail_url("order-1")).content.decode()
    for label in (
        "Request id",
        "Queue",
        "State",
        "Due at",
        "Owner",
        "Attempts",
        "Fence",
        "Lease until",
        "Created at",
        "Updated at",
        "Traceparent",
        "Size",
        "Version",
    ):
        assert f'<th scope="row">{label}</th>' in text
    assert TRACEPARENT in text
    assert "worker-7" in text
    assert 'data-field="checksum"' in text and "holds" in text
    # The payload is JSON, so it is shown indented.
    assert "Payload (JSON)" in text
    assert (
        "{\n  &quot;to&quot;: &quot;ann@example.com&quot;,\n  &quot;items&quot;: [\n    1," in text
    )


def test_record_page_escapes_a_text_payload(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit("html", "<script>alert(1)</script>")
    text = admin_client.get(detail_url("html")).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<script>alert(1)" not in text
    assert "Payload (JSON)" not in text


def test_record_page_of_corrupt_bytes(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    raw = b"\x00<b>broken</b>\xff" + b"z" * 5000
    redis_client.hset(admin_ledger.records_key, "bad", raw)
    text = admin_client.get(detail_url("bad")).content.decode()
    assert "fails" in text and "checksum" in text.lower()
    assert "\\x00&lt;b&gt;broken&lt;/b&gt;\\xff" in text
    assert "<b>broken" not in text
    assert f"Show all {len(raw)} bytes" in text
    assert text.count("z") < 5000
    full = admin_client.get(detail_url("bad"), {"full": "1"}).content.decode()
    assert "z" * 5000 in full


@pytest.mark.parametrize("key", ["default nobody", "no-space-in-key", "secret anything"])
def test_missing_record_page_redirects_with_a_message(
    admin_client: Client, admin_ledger: Ledger, key: str
) -> None:
    url = reverse("admin:django_ledger_record_change", args=(quote(key),))
    response = admin_client.get(url, follow=True)
    assert response.redirect_chain[-1][0] == CHANGELIST
    assert any("it may have been removed" in message for message in messages_of(response))
