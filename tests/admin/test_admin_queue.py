"""Queue health in the admin with Django's test client: counters, gate, expired leases."""

from __future__ import annotations

import html
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from django_ledger import AdmissionStatus, State
from django_ledger.admin.display import duration_text
from django_ledger.conf import get_ledger
from django_ledger.core.ledger import Ledger

pytestmark = pytest.mark.django_db

QUEUES = "/admin/django_ledger/queue/"
HEALTH = "/admin/django_ledger/queue/default/change/"
ROW = re.compile(r'<th class="field-request_id"><a href="[^"]*">([^<]*)</a></th>')
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE = 60_000


def figure(text: str, name: str) -> str:
    match = re.search(rf'data-figure="{name}">([^<]*)<', text)
    assert match, f"no figure {name}"
    return match.group(1)


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_the_admin_index_links_to_queue_health(admin_client: Client, admin_ledger: Ledger) -> None:
    text = admin_client.get("/admin/").content.decode()
    assert f'<a href="{QUEUES}">Queues</a>' in text


def test_overview_lists_every_queue_with_its_counters(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit_many([("a", "x"), ("b", "x"), ("later", "x")])
    admin_ledger.claim("w", lease=60)
    get_ledger("emails").close_gate()
    text = admin_client.get(QUEUES).content.decode()
    for name in ("default", "emails", "reports"):
        assert f'<a href="/admin/django_ledger/queue/{name}/change/">{name}</a>' in text
    row = re.search(r">default</a></th>(.*?)</tr>", text, re.S)
    assert row is not None
    numbers = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))
    assert numbers[:2] == ["2", "0"]  # pending due, pending later
    assert numbers[2] == "1"  # claimed
    emails = re.search(r">emails</a></th>(.*?)</tr>", text, re.S)
    assert emails is not None and "closed" in emails.group(1)


def test_health_page_shows_the_stats_snapshot(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit_many([("a", "x"), ("b", "x")])
    admin_ledger.admit("later", "x", delay=3600)
    done = admin_ledger.claim("w", lease=60)
    assert done is not None
    admin_ledger.settle(done, State.COMPLETED)
    admin_ledger.claim("w", lease=60)
    text = admin_client.get(HEALTH).content.decode()
    assert figure(text, "pending-due") == "0"
    assert figure(text, "pending-due-later") == "1"
    assert figure(text, "claimed") == "1"
    assert figure(text, "completed") == "1"
    assert figure(text, "expired-leases-waiting-for-repair") == "0"
    assert figure(text, "total-records") == "3"
    assert figure(text, "oldest-due") == "-"  # nothing due
    assert "The gate is <strong>open</strong>" in text
    assert "Most attempts" in text


def read_at(text: str) -> int:
    """Return the instant (epoch ms, the server's clock) the page's snapshot was read at."""
    match = re.search(r"One snapshot, read at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC", text)
    assert match, "no snapshot time"
    moment = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(milliseconds=1)


def test_oldest_due_age(admin_client: Client, admin_ledger: Ledger) -> None:
    now = admin_ledger.server_time_ms()
    oldest = now - 90 * MINUTE  # due an hour and a half ago: the one waiting longest
    admin_ledger.close_gate()
    try:
        for request_id, due_at in [
            ("oldest", oldest),
            ("newer", now - MINUTE),
            ("later", now + 60 * MINUTE),
        ]:
            answer = admin_ledger.import_record(request_id, "x", State.PENDING, due_at)
            assert answer.status is AdmissionStatus.ADMITTED
    finally:
        admin_ledger.open_gate()
    admin_ledger.admit("fresh", "x")
    text = admin_client.get(HEALTH).content.decode()
    assert figure(text, "pending-due") == "3" and figure(text, "pending-due-later") == "1"
    # How long the oldest due record had waited when the counters were read (1 h 30 min
    # and the moments since): not the newer one's minute, nor the fresh one's instant.
    waited = read_at(text) - oldest
    assert waited >= 90 * MINUTE
    assert figure(text, "oldest-due") == duration_text(waited)


def test_expired_leases_waiting_for_repair(admin_client: Client, admin_ledger: Ledger) -> None:
    admin_ledger.admit_many([("gone", "x"), ("alive", "x")])
    expired = admin_ledger.claim("dead-worker", lease=0.001)
    admin_ledger.claim("live-worker", lease=600)
    assert expired is not None
    time.sleep(0.05)
    text = admin_client.get(HEALTH).content.decode()
    assert figure(text, "expired-leases-waiting-for-repair") == "1"
    assert "Expired leases waiting for repair: 1" in text
    table = re.search(r'<table id="expired">(.*?)</table>', text, re.S)
    assert table is not None
    assert expired.request_id in table.group(1) and "dead-worker" in table.group(1)
    assert "live-worker" not in table.group(1)
    # The link lists them in the records list, by lease expiry.
    link = re.search(r'<a href="([^"]*)">All expired leases</a>', text)
    assert link is not None
    listed = ROW.findall(admin_client.get(html.unescape(link.group(1))).content.decode())
    assert listed == [expired.request_id]


def test_close_and_open_the_gate_with_confirmation(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit("a", "x")
    text = admin_client.get(HEALTH).content.decode()
    button = re.search(r'id="gate-button" href="([^"]*)">Close the gate<', text)
    assert button is not None
    confirm = admin_client.get(button.group(1))
    assert confirm.status_code == 200
    assert "Close the gate of queue default: are you sure?" in confirm.content.decode()
    assert not admin_ledger.gate_closed  # showing the page changes nothing
    response = admin_client.post(button.group(1), follow=True)
    assert response.redirect_chain[-1][0] == HEALTH
    assert "Closed the gate of queue default." in messages_of(response)
    assert admin_ledger.gate_closed
    assert admin_ledger.claim("w", lease=60) is None
    text = response.content.decode()
    assert "The gate is <strong>closed: no claim succeeds</strong>" in text
    opened = admin_client.post("/admin/django_ledger/queue/default/gate/open/", follow=True)
    assert "Opened the gate of queue default." in messages_of(opened)
    assert not admin_ledger.gate_closed
    assert admin_ledger.claim("w", lease=60) is not None
    log = LogEntry.objects.filter(object_id="default").order_by("action_time")
    assert [entry.change_message for entry in log] == ["Closed the gate", "Opened the gate"]
    history = admin_client.get("/admin/django_ledger/queue/default/history/").content.decode()
    assert "Closed the gate" in history


def test_unknown_queue_or_gate_action(admin_client: Client, admin_ledger: Ledger) -> None:
    response = admin_client.get("/admin/django_ledger/queue/nope/change/", follow=True)
    assert response.redirect_chain[-1][0] == QUEUES
    assert any("No queue 'nope'" in message for message in messages_of(response))
    assert admin_client.post("/admin/django_ledger/queue/nope/gate/close/").status_code == 404
    assert admin_client.post("/admin/django_ledger/queue/default/gate/explode/").status_code == 404
    assert not admin_ledger.gate_closed


def crumbs_markup(text: str) -> str:
    """The breadcrumbs' container tag: ``ol`` (Django 6.1's admin) or ``div`` (before)."""
    found = re.findall(r'<(ol|div) class="breadcrumbs">', text)
    assert len(found) == 1, found
    return str(found[0])


def test_every_ledger_page_writes_breadcrumbs_as_this_djangos_admin_does(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit("r1", "x")
    stock = crumbs_markup(admin_client.get("/admin/auth/user/").content.decode())
    pages = [
        QUEUES,
        "/admin/django_ledger/queue/default/change/",
        "/admin/django_ledger/queue/tasks/",
        "/admin/django_ledger/worker/",
        "/admin/django_ledger/schedule/",
        reverse("admin:django_ledger_record_change", args=(quote("default r1"),)),
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        assert crumbs_markup(response.content.decode()) == stock, page


def test_each_chart_has_a_legend_of_its_own_series(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    text = admin_client.get(HEALTH).content.decode()

    def legend(chart: str) -> list[str]:
        found = re.search(rf'id="{chart}".*?<p class="ledger-legend">(.*?)</p>', text, re.S)
        assert found is not None, chart
        return [
            html.unescape(name) for name in re.findall(r"&#9632; ([^<]+)</span>", found.group(1))
        ]

    assert legend("chart-throughput") == ["completed", "failed"]
    assert legend("chart-run") == legend("chart-wait") == ["p50", "p95"]
    # No legend outside a chart speaks for several of them at once.
    over_time = text.split('id="over-time"', 1)[1].split('class="ledger-chart"', 1)[0]
    assert "ledger-legend" not in over_time
