"""The API's flow limits: read with their use, changed with the limit permission."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger import Ledger
from django_ledger.core.limits import Limits, Rate
from tests.support.api_helpers import error_code, post_json, url

pytest_plugins = ["tests.support.api_fixtures"]

LIMITS = url("default", "limits/")
CHANGE = url("default", "limits/change/")


@pytest.fixture
def limited(api_ledger: Ledger) -> Ledger:
    api_ledger.set_limits(Limits(rate=Rate(5, 1000, 5), concurrency=2), source="settings")
    api_ledger.admit_many((f"r{i}", "p") for i in range(6))
    CLAIMED_AT[:] = [time.monotonic()]  # before: the server spends the tokens after this
    api_ledger.claim_many("w", 6)
    return api_ledger


#: Just before ``limited`` spent its tokens: the bucket refills at 5 a second from then
#: at most (the claim's own instant on the server clock comes after it).
CLAIMED_AT: list[float] = []


def test_reading_shows_each_limit_and_its_use(
    limited: Ledger, api_client_for: Callable[..., APIClient]
) -> None:
    response = api_client_for("view_queue").get(LIMITS)
    refilled = 5 * (time.monotonic() - CLAIMED_AT[0])  # tokens back since the claims, at most
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["rate"] == {"limit": 5, "period_ms": 1000, "burst": 5}
    assert body["concurrency"] == 2 and body["set_by"] == "settings" and body["key"] is None
    assert body["slots_taken"] == 2 and body["due_now"] == 4 and body["held"] == 4
    assert 2.9 <= body["tokens_left"] <= min(5, 3 + refilled + 0.05)


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


def test_reading_lists_the_keys_with_limits_of_their_own(
    api_ledger: Ledger, api_client_for: Callable[..., APIClient]
) -> None:
    api_ledger.set_limits(Limits(concurrency=3, key="task"), source="settings")
    api_ledger.set_key_limits("shop.tasks.export", Limits(concurrency=1), source="settings")
    body = api_client_for("view_queue").get(LIMITS).json()
    assert body["key"] == "task"
    assert body["key_limits"] == [
        {"key": "shop.tasks.export", "rate": None, "concurrency": 1, "set_by": "settings"}
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"rate": f"{2**63}/1"},
        {"rate": f"1/1/{2**63}"},
        {"rate": f"{2**53 + 1}/1"},
        {"rate": "1000000001/1"},
        {"rate": "1/31622401"},
        {"rate": "1/0.0004"},
        {"rate": "5/1", "concurrency": 2**63},
        {"rate": "9" * 39 + "/1"},
    ],
)
def test_a_limit_out_of_bounds_is_400_and_every_reader_still_reads(
    limited: Ledger, api_client_for: Callable[..., APIClient], body: dict[str, Any]
) -> None:
    client = api_client_for("view_queue", "limit")
    response = post_json(client, CHANGE, body)
    assert response.status_code == 400 and error_code(response) == "invalid", response.content
    assert limited.limits().limits == Limits(Rate(5, 1000, 5), 2)
    assert limited.limits().source == "settings"
    read = client.get(LIMITS)
    assert read.status_code == 200 and read.json()["rate"]["limit"] == 5


def test_the_largest_limits_are_stored_exactly(
    limited: Ledger, api_client_for: Callable[..., APIClient]
) -> None:
    body = {"rate": "1000000000/31622400/1000000000", "concurrency": 1_000_000_000}
    client = api_client_for("view_queue", "limit")
    assert post_json(client, CHANGE, body).status_code == 200
    read = client.get(LIMITS).json()
    assert read["rate"] == {"limit": 10**9, "period_ms": 31_622_400_000, "burst": 10**9}
    assert read["concurrency"] == 10**9


def test_a_change_answers_the_use_only_to_who_may_read_it(
    limited: Ledger, api_client_for: Callable[..., APIClient]
) -> None:
    response = post_json(api_client_for("limit"), CHANGE, {"concurrency": 3})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["concurrency"] == 3 and body["rate"]["limit"] == 5
    assert body["set_by"] == "operator"
    for figure in ("tokens_left", "slots_taken", "due_now", "held", "keys_waiting", "keys"):
        assert figure not in body
    seen = post_json(api_client_for("view_queue", "limit"), CHANGE, {"concurrency": 3}).json()
    assert seen["slots_taken"] == 2 and seen["due_now"] == 4
