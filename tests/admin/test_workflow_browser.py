"""The Workflows list and the "Cancel workflow" button in a real browser (Chromium).

From the queues list to the queue's Workflows page, to a workflow, through its
confirmation page to the message and the cancelled steps. Skipped when Chromium or
Playwright is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_ledger.core.ledger import Ledger
from django_ledger.tasks.workflows import chain, get_workflow, sig
from tests.support.browser import log_in, new_page
from tests.support.tasks_app import workflow_tasks as t

pytest_plugins = ["tests.support.browser_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


def test_list_workflows_open_one_and_cancel_it(
    browser: Any, live_server: Any, admin_ledger: Ledger, django_user_model: Any
) -> None:
    chain(sig(t.plus, 1), sig(t.plus), sig(t.plus)).enqueue(id="order-42")
    chain(sig(t.plus, 2)).enqueue(id="order-43")
    page = log_in(new_page(browser), live_server, django_user_model)
    page.goto(f"{live_server.url}/admin/django_ledger/queue/")
    page.click('#workflow-links a[data-queue="default"]')
    page.wait_for_selector("#workflows")
    assert page.locator('#workflows tr[data-workflow="order-42"]').get_attribute("data-state") == (
        "RUNNING"
    )
    assert (
        page.locator('#workflows tr[data-workflow="order-42"] [data-field="done"]')
        .inner_text()
        .strip()
        == "0 / 3"
    )
    assert page.locator("#workflows tr[data-workflow]").count() == 2
    page.click('#workflows tr[data-workflow="order-42"] a')
    page.wait_for_selector("#workflow-steps")
    page.click("#cancel-workflow")
    page.wait_for_selector("#confirm-warning")
    assert "order-42" in page.locator("#confirm-warning").inner_text()
    page.click("#confirm-cancel-workflow")
    page.wait_for_selector("ul.messagelist")
    assert "Cancelled workflow order-42: 3 steps not yet started were cancelled." in (
        page.locator("ul.messagelist").inner_text()
    )
    states = page.locator("#workflow-steps tr[data-step]").evaluate_all(
        "rows => rows.map(r => r.dataset.state)"
    )
    assert states == ["CANCELLED", "CANCELLED", "CANCELLED"]
    assert page.locator("#cancel-workflow").count() == 0
    assert get_workflow("order-42").cancelled
    page.click("#workflows-link")
    page.wait_for_selector("#workflows")
    page.click('#workflow-states a[data-state="CANCELLED"]')
    page.wait_for_selector("#workflows")
    shown = page.locator("#workflows tr[data-workflow]").evaluate_all(
        "rows => rows.map(r => r.dataset.workflow)"
    )
    assert shown == ["order-42"]
