"""The API's flow limits: read with their use, changed with the limit permission."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger import Ledger
from django_ledger.core.limits import Limits, Rate
from tests.api_helpers import error_code, post_json, url

pytest_plugins = ["tests.api_fixtures"]

LIMITS = url("default", "limits/")
CHANGE = url("default", "limits/change/")


@pytest.fixture
def limited(api_ledger: Ledger) -> Ledger:
    api_ledger.set_limits(Limits(rate=Rate(5, 1000, 5), concurrency=2), source="settings")
    api_ledger.admit_many((f"r{i}", "p") for i in range(6))
    api_ledger.claim_many("w", 6)
    return api_ledger


def test_reading_shows_each_limit_and_its_use(
    limited: Ledger, api_client_for: Callable[..., APIClient]
) -> None:
    response = api_client_for("view_queue").get(LIMITS)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["rate"] == {"limit": 5, "period_ms": 1000, "burst": 5}
    assert body["concurrency"] == 2 and body["set_by"] == "settings" and body["key"] is None
    assert body["slots_taken"] == 2 and body["due_now"] == 4 and body["held"] == 4
    assert 2.9 <= body["tokens_left"] <= 3.5


def test_changing_needs_the_limit_permission_and_is_logged(
    limited: Ledger,
    api_client_for: Callable[..., APIClient],
    caplog: pytest.LogCaptureFixture,
) -> None:
    refused = post_json(api_client_for("view_queue", "operate"), CHANGE, {"concurrency": 4})
    assert refused.status_code == 403 and error_code(refused) == "permission_denied"
    assert limited.limits().limits.concurrency == 2
    client = api_client_for("view_queue", "limit")
    with caplog.at_level(logging.INFO, logger="django_ledger.limits"):
        response = post_json(client, CHANGE, {"concurrency": 4, "rate": None})
    assert response.status_code == 200, response.content
    assert response.json()["concurrency"] == 4 and response.json()["rate"] is None
    assert limited.limits().limits == Limits(None, 4) and limited.limits().source == "operator"
    assert any("set by API user" in r.getMessage() for r in caplog.records)
    # More room: the held records are claimable now.
    assert len(limited.claim_many("w", 6)) == 2


@pytest.mark.parametrize(
    "body", [{"rate": "fast"}, {"concurrency": 0}, {"concurrency": "x"}, {"reset": "maybe"}]
)
def test_a_bad_change_is_400_and_writes_nothing(
    limited: Ledger, api_client_for: Callable[..., APIClient], body: dict[str, Any]
) -> None:
    response = post_json(api_client_for("view_queue", "limit"), CHANGE, body)
    assert response.status_code == 400 and error_code(response) == "invalid"
    assert limited.limits().limits == Limits(Rate(5, 1000, 5), 2)


def test_reading_needs_view_queue(
    limited: Ledger, api_client_for: Callable[..., APIClient]
) -> None:
    assert api_client_for("view").get(LIMITS).status_code == 403
