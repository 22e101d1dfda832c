"""The counters' charts in the admin, the Tasks page, and the series API."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from django_ledger.conf import get_ledger
from django_ledger.core.counters import Counters, Tally
from django_ledger.core.ledger import Ledger

pytestmark = pytest.mark.django_db

QUEUES = "/admin/django_ledger/queue/"
HEALTH = "/admin/django_ledger/queue/default/change/"
TASKS = "/admin/django_ledger/queue/tasks/"


@pytest.fixture
def counted(namespace: str, settings: Any) -> Ledger:
    """The default queue, with counts a worker flushed this minute."""
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace}
    ledger = get_ledger("default")
    tally = Tally()
    for _ in range(40):
        tally.add("default", "app.tasks.send", "completed", run_s=0.2, wait_s=0.01)
    for _ in range(10):
        tally.add("default", "app.tasks.send", "failed", run_s=3, wait_s=0.01)
    tally.add("default", "app.tasks.resize", "completed", run_s=40, wait_s=2)
    for n in range(3):  # three due, one of them then claimed: the flush samples it
        ledger.admit(f"r-{n}", "work")
    assert ledger.claim("w", lease=60) is not None
    Counters(ledger.redis, namespace).flush(tally, force=True, queues=["default"])
    return ledger


def test_the_queue_page_draws_throughput_and_times(admin_client: Client, counted: Ledger) -> None:
    for window in ("hour", "day", "week"):
        text = admin_client.get(HEALTH, {"window": window}).content.decode()
        assert text.count('<svg class="ledger-svg"') == 4
        assert re.search(r'<rect class="done"[^>]*data-value="41"', text)
        assert re.search(r'<rect class="failed"[^>]*data-value="10"', text)
        assert '<polyline class="p95"' in text
        # The table toggle holds the same numbers.
        assert "<td>41</td><td>10</td>" in text
        assert "django_ledger/live.js" in text
        # Depth: one sample, drawn as a point per line, and its row in the table.
        depth = text[text.index('id="chart-depth"') :]
        depth = depth[: depth.index("</figure>")]
        for line in ("due", "claimed", "dead"):
            assert f'<circle class="{line}"' in depth
        assert "<td>2</td><td>1</td><td>0</td><td>2</td></tr>" in depth
        assert "(last sample: 2 due, 1 claimed, 0 dead)" in depth
        assert depth.count("<tr><td>") == 1  # unsampled buckets are not rows


def test_the_live_fragment_is_the_charts_alone(admin_client: Client, counted: Ledger) -> None:
    text = admin_client.get(HEALTH, {"fragment": "charts", "window": "day"}).content.decode()
    assert text.lstrip().startswith('<div id="ledger-charts" data-window="day">')
    assert text.count("<svg") == 4 and "<html" not in text
    assert 'id="chart-depth"' in text  # the live view refreshes the depth too


def test_the_queue_list_has_a_sparkline_per_queue(admin_client: Client, counted: Ledger) -> None:
    text = admin_client.get(QUEUES).content.decode()
    rows = re.findall(r'<th><a href="/admin/django_ledger/queue/[^"]+/change/">', text)
    assert len(rows) >= 2
    assert text.count('<svg class="ledger-spark"') == len(rows)
    assert "51 attempts ended in the last hour" in text


def test_the_tasks_page_lists_each_task(admin_client: Client, counted: Ledger) -> None:
    text = admin_client.get(TASKS, {"window": "day"}).content.decode()
    send = re.search(r'<tr data-task="app.tasks.send">(.*?)</tr>', text, re.S)
    assert send, text
    cells = re.findall(r'<td class="num">([^<]*)</td>', send.group(1))
    assert cells[:5] == ["50", "40", "10", "0", "20.0%"]
    assert '?queue=default&amp;task=app.tasks.send">app.tasks.send</a>' in send.group(1)


def test_the_tasks_page_needs_the_queue_view_permission(
    client: Client, django_user_model: Any, counted: Ledger
) -> None:
    user = django_user_model.objects.create(username="staff", is_staff=True)
    client.force_login(user)
    assert client.get(TASKS).status_code == 403
