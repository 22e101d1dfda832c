"""The records list's bulk actions: everything the current filter matches, after a preview.

Fifty thousand DEAD records retried from the list's filter while a real worker fails them
again: each retried once, the counts on the run's page what Redis holds, one history
entry with the filter and the counts. A user without the action's permission sees no
link and is refused by URL; a filter over several queues, or one the list cannot show,
is refused with a message.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.test import Client

from django_ledger.core import State
from django_ledger.core.ledger import Ledger
from django_ledger.services.bulk import load_run
from tests.admin.test_admin_records import bounds, messages_of
from tests.support.bulk_fixtures import QUEUE, assert_each_retried_once, runs
from tests.support.bulk_helpers import import_ended
from tests.support.worker_process import WorkerProcess, wait_until

pytest_plugins = ["tests.support.bulk_fixtures"]
pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/django_ledger/record/"
BULK = CHANGELIST + "bulk/"
LINK = re.compile(r'<a href="([^"]+)" class="ledger-bulk-link"[^>]*>([^<]+)</a>')
RUN = re.compile(r"/bulk/" + QUEUE + r"/([0-9a-f]{32})/$")


def links(client: Client, query: str) -> dict[str, str]:
    page = client.get(f"{CHANGELIST}?{query}")
    assert page.status_code == 200
    return {
        html.unescape(label): html.unescape(url)
        for url, label in LINK.findall(page.content.decode())
    }


def start(client: Client, preview_url: str) -> tuple[str, str]:
    """Open the preview and confirm it: (the preview's text, the run page's URL)."""
    preview = client.get(preview_url)
    assert preview.status_code == 200
    text = preview.content.decode()
    form = {
        "action": re.search(r'name="action" value="([^"]+)"', text).group(1),  # type: ignore[union-attr]
        "filter": html.unescape(re.search(r'name="filter" value="([^"]*)"', text).group(1)),  # type: ignore[union-attr]
    }
    started = client.post(BULK, form)
    assert started.status_code == 302, messages_of(started)
    return text, started["Location"]


def test_a_bulk_retry_of_50000_dead_records_from_the_list_with_a_worker_running(
    bulk_ledger: Ledger,
    dying_worker: WorkerProcess,
    admin_client: Client,
    admin_user: Any,
    namespace: str,
) -> None:
    now = bulk_ledger.server_time_ms()
    ids = import_ended(bulk_ledger, 50_000, ended_at=now - 120_000)
    # No state filter: retry takes DEAD, then FAILED (where the worker's failures land).
    found = links(admin_client, f"queue={QUEUE}")
    assert set(found) == {
        "Retry now: all matching",
        "Mark failed: all matching",
        "Purge: all matching",
        "Cancel: all matching",
    }
    text, run_url = start(admin_client, found["Retry now: all matching"])
    assert "50000 records match now." in text
    run_id = RUN.search(run_url).group(1)  # type: ignore[union-attr]
    steps = 1
    while not load_run(QUEUE, run_id).finished:
        page = admin_client.get(run_url).content.decode()
        assert 'id="bulk-step"' in page and "<progress" in page  # it shows how far it is
        assert admin_client.post(run_url).status_code == 302
        steps += 1
    ran_meanwhile = runs(bulk_ledger.redis, namespace)
    # The worker has ended at least one retried record FAILED (one it is running may not have).
    wait_until(lambda: bulk_ledger.stats().failed, what="a record failed again")
    dying_worker.stop()
    run = load_run(QUEUE, run_id)
    page = admin_client.get(run_url).content.decode()
    assert f"{run.done} done, {run.skipped} skipped (moved on meanwhile), of 50000 matched" in page
    assert "The run has ended." in page
    assert_each_retried_once(bulk_ledger, ids, run, run.done, run.skipped, ran_meanwhile, namespace)
    (entry,) = LogEntry.objects.filter(object_id=QUEUE)
    assert entry.user == admin_user
    assert "bulk retry: 50000 done, 0 skipped" in entry.change_message
    assert '"states": ["DEAD", "FAILED", "COMPLETED"]' in entry.change_message


def test_the_preview_reads_the_lists_time_range_and_counts(
    bulk_ledger: Ledger, admin_client: Client
) -> None:
    now = bulk_ledger.server_time_ms() // 1000 * 1000
    import_ended(bulk_ledger, 10, state=State.FAILED, ended_at=now - 100_000, ties=1)
    import_ended(bulk_ledger, 5, state=State.FAILED, ended_at=now - 10_000, ties=1, prefix="n")
    query = f"queue={QUEUE}&state=FAILED&" + "&".join(
        f"{k}={v}" for k, v in bounds("updated_at", now - 20_000, None).items()
    )
    found = links(admin_client, query)
    text, run_url = start(admin_client, found["Purge: all matching"])
    assert "5 records match now." in text
    run = load_run(QUEUE, RUN.search(run_url).group(1))  # type: ignore[union-attr]
    assert (run.finished, run.done, run.skipped) == (True, 5, 0)
    assert bulk_ledger.stats().failed == 10
    assert bulk_ledger.resolve("n000000") is None


def test_an_action_needs_its_permission_on_the_queue(
    bulk_ledger: Ledger, django_user_model: Any
) -> None:
    now = bulk_ledger.server_time_ms()
    import_ended(bulk_ledger, 3, ended_at=now - 10_000)
    user = django_user_model(username="viewer", is_staff=True)
    user.set_unusable_password()
    user.save()
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_record", "purge_record"])
    )
    client = Client()
    client.force_login(user)
    assert set(links(client, f"queue={QUEUE}")) == {"Purge: all matching"}
    response = client.get(f"{BULK}?action=retry&queue={QUEUE}", follow=True)
    assert "Retry now: you may not retry records of queue 'dying'" in messages_of(response)
    refused = client.post(BULK, {"action": "retry", "filter": f"queue={QUEUE}"})
    assert refused.status_code == 302
    assert bulk_ledger.stats().dead == 3


def test_a_filter_over_several_queues_or_a_bad_one_is_refused(
    bulk_ledger: Ledger, admin_client: Client
) -> None:
    response = admin_client.get(f"{BULK}?action=retry", follow=True)
    assert "Retry now: filter the list by one queue first" in messages_of(response)
    response = admin_client.get(f"{BULK}?action=retry&queue=nowhere", follow=True)
    assert any("no queue 'nowhere' to show" in m for m in messages_of(response))
    response = admin_client.get(f"{BULK}?action=fail&queue={QUEUE}&state=DEAD", follow=True)
    assert "Mark failed: fail applies to PENDING records, not DEAD" in messages_of(response)
    assert admin_client.get(f"{BULK}?action=explode&queue={QUEUE}").status_code == 404


def test_a_run_page_needs_the_runs_permission(
    bulk_ledger: Ledger, admin_client: Client, django_user_model: Any
) -> None:
    import_ended(bulk_ledger, 3, ended_at=bulk_ledger.server_time_ms() - 10_000)
    _, run_url = start(admin_client, links(admin_client, f"queue={QUEUE}")["Purge: all matching"])
    user = django_user_model(username="looker", is_staff=True)
    user.set_unusable_password()
    user.save()
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_record"]))
    client = Client()
    client.force_login(user)
    assert client.get(run_url).status_code == 403
    assert client.post(run_url).status_code == 403
    assert admin_client.get(CHANGELIST + f"bulk/{QUEUE}/{'0' * 32}/").status_code == 404
