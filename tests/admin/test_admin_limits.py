"""A queue's flow limits in the admin: shown with their use, changed with a permission."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from django_ledger.conf import get_ledger
from django_ledger.core.ledger import Ledger
from django_ledger.core.limits import Limits, Rate

pytestmark = pytest.mark.django_db

PAGE = "/admin/django_ledger/queue/default/change/"
CHANGE = "/admin/django_ledger/queue/default/limits/"


@pytest.fixture
def limited(namespace: str, settings: Any) -> Ledger:
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "QUEUES": {"default": {"CONCURRENCY": 2, "KEY": "kwargs.tenant_id"}},
    }
    return get_ledger("default")


def test_the_page_shows_each_limit_its_use_and_the_keys(
    limited: Ledger, login_as: Callable[..., Client]
) -> None:
    for i, tenant in enumerate(["a", "a", "a", "b"]):
        body = json.dumps({"args": [], "kwargs": {"tenant_id": tenant}})
        limited.admit(f"r{i}", body)
    limited.claim_many("w", 10)  # a: 2 of 3 (its limit), b: 1
    text = login_as("view_queue").get(PAGE).content.decode()
    assert 'id="limits"' in text and "concurrency 2 per key kwargs.tenant_id" in text
    assert 'data-limit="slots-taken-records-claimed">3<' in text
    assert 'data-limit="due-records-held-by-the-limits">1<' in text
    assert '<td>a</td><td class="num">1</td><td class="num">2</td>' in text
    assert 'id="limits-form"' not in text  # viewing needs no more; changing does


def test_changing_the_limits_needs_limit_queue_and_is_logged(
    limited: Ledger, login_as: Callable[..., Client], caplog: pytest.LogCaptureFixture
) -> None:
    viewer = login_as("view_queue", "operate_queue")
    assert viewer.post(CHANGE, {"concurrency": "5"}).status_code == 403
    assert limited.limits().limits.concurrency == 2
    operator = login_as("view_queue", "limit_queue")
    assert 'id="limits-form"' in operator.get(PAGE).content.decode()
    with caplog.at_level(logging.INFO, logger="django_ledger.limits"):
        response = operator.post(CHANGE, {"rate": "10/1/4", "concurrency": "5"})
    assert response.status_code == 302
    use = limited.limits()
    assert use.limits == Limits(Rate(10, 1000, 4), 5, "kwargs.tenant_id")
    assert use.source == "operator"
    entry = LogEntry.objects.get()
    assert entry.object_id == "default" and "rate 10/1s burst 4" in entry.change_message
    assert any("set by admin user user" in r.getMessage() for r in caplog.records)


def test_a_bad_change_says_why_and_writes_nothing(
    limited: Ledger, login_as: Callable[..., Client]
) -> None:
    operator = login_as("view_queue", "limit_queue")
    response = operator.post(CHANGE, {"rate": "fast"}, follow=True)
    assert "The limits did not change" in response.content.decode()
    assert limited.limits().limits == Limits(None, 2, "kwargs.tenant_id")
    assert not LogEntry.objects.exists()


def test_the_page_lists_the_keys_with_limits_of_their_own(
    limited: Ledger, login_as: Callable[..., Client]
) -> None:
    limited.set_key_limits("export", Limits(concurrency=1))
    limited.set_key_limits("mail", Limits(rate=Rate(5, 1000, 5)), source="settings")
    text = login_as("view_queue").get(PAGE).content.decode()
    assert 'id="limits-key-limits"' in text
    row = '<td>export</td><td>the queue\'s</td><td class="num">1</td><td>operator</td>'
    assert row in text
    assert f"<td>mail</td><td>{Rate(5, 1000, 5)}</td>" in text


@pytest.mark.parametrize("rate", [f"{2**63}/1", f"1/1/{2**63}", f"{2**53 + 1}/1", "1/31622401"])
def test_a_limit_out_of_bounds_says_why_and_the_page_still_reads(
    limited: Ledger, login_as: Callable[..., Client], rate: str
) -> None:
    operator = login_as("view_queue", "limit_queue")
    response = operator.post(CHANGE, {"rate": rate}, follow=True)
    assert response.status_code == 200
    assert "The limits did not change" in response.content.decode()
    assert limited.limits().limits == Limits(None, 2, "kwargs.tenant_id")
    assert not LogEntry.objects.exists()
    assert operator.get(PAGE).status_code == 200


def test_another_teams_queue_answers_as_a_missing_one(
    namespace: str, settings: Any, login_as: Callable[..., Client]
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "QUEUES": {"default": {}, "reports": {"GROUPS": ["ops"]}},
    }
    outsider = login_as("view_queue", "limit_queue")
    theirs = outsider.post("/admin/django_ledger/queue/reports/limits/", {"concurrency": "5"})
    missing = outsider.post("/admin/django_ledger/queue/nope/limits/", {"concurrency": "5"})
    assert theirs.status_code == missing.status_code == 404
    assert get_ledger("reports").limits().limits == Limits()
    # A member of the team may change them.
    with_group = login_as("view_queue", "limit_queue", groups=("ops",))
    assert (
        with_group.post(
            "/admin/django_ledger/queue/reports/limits/", {"concurrency": "5"}
        ).status_code
        == 302
    )
    assert get_ledger("reports").limits().limits == Limits(None, 5)
