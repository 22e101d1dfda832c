"""API operations: repair one page at a time, the gate, the quarantine list."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger import Ledger, State
from django_ledger.core.records import encode_record
from tests.support.api_helpers import error_code, post_json, url
from tests.support.ledger_helpers import GARBAGE

pytest_plugins = ["tests.support.api_fixtures"]

REPAIR = url("default", "repair/")
GATE = url("default", "gate/")
QUARANTINE = url("default", "quarantine/")


#: Pages one repair cycle of these tests may take before it counts as a hang.
MAX_PAGES = 1_000
#: Seconds a test waits for a lease to end on the server's clock.
LEASE_WAIT = 5.0


def repair_cycle(api_root: APIClient, count: int = 2) -> tuple[dict[str, int], int]:
    """Run one full cycle through the API; return summed counts and pages."""
    totals: dict[str, int] = {}
    cursor, pages = "0", 0
    while True:
        if pages >= MAX_PAGES:
            pytest.fail(f"the repair cycle did not end within {MAX_PAGES} pages")
        response = post_json(api_root, REPAIR, {"cursor": cursor, "count": count})
        assert response.status_code == 200, response.content
        body = response.json()
        pages += 1
        for name, value in body["counts"].items():
            totals[name] = totals.get(name, 0) + value
        cursor = body["cursor"]
        assert body["done"] is (cursor == "0")
        if body["done"]:
            return totals, pages


def test_repair_pages_mend_indexes_and_quarantine_corrupt_bytes(
    api_root: APIClient, api_ledger: Ledger, redis_client: Any
) -> None:
    # Values over 64 bytes: a hash Redis pages through (not one listpack page).
    api_ledger.admit_many([(f"r{i}", "x" * 100) for i in range(200)])
    redis_client.zrem(api_ledger.ready_key, "r1", "r2")
    redis_client.hset(api_ledger.records_key, "r3", GARBAGE)
    totals, pages = repair_cycle(api_root, count=50)
    assert pages > 1
    assert totals["scanned"] >= 200
    assert totals["reindexed"] == 2
    assert totals["quarantined"] == 1
    assert api_ledger.stats().quarantined == 1
    assert redis_client.zscore(api_ledger.ready_key, "r1") is not None


def test_repair_starts_at_cursor_zero_by_default(api_root: APIClient, api_ledger: Ledger) -> None:
    api_ledger.admit("r1", "p")
    response = post_json(api_root, REPAIR, {})
    assert response.status_code == 200
    assert response.json() == {
        "cursor": "0",
        "done": True,
        "counts": {
            "scanned": 1,
            "reindexed": 0,
            "expired": 0,
            "dead": 0,
            "quarantined": 0,
            "purged": 0,
            "stale": 0,
        },
    }


@pytest.mark.parametrize(
    "body",
    [{"cursor": "abc"}, {"cursor": "-1"}, {"count": 0}, {"count": 10_001}, {"cursor": "1" * 21}],
)
def test_invalid_repair_steps_are_400(api_root: APIClient, body: dict[str, Any]) -> None:
    response = post_json(api_root, REPAIR, body)
    assert response.status_code == 400
    assert error_code(response) == "invalid"


def test_the_gate_closes_and_opens(api_root: APIClient, api_ledger: Ledger) -> None:
    api_ledger.admit("r1", "p")
    response = post_json(api_root, GATE, {"closed": True})
    assert response.status_code == 200
    assert response.json() == {"gate_closed": True}
    assert api_ledger.gate_closed
    assert post_json(api_root, url("default", "claims/"), {"owner": "w"}).status_code == 204
    assert api_root.get(url("default", "stats/")).json()["gate_closed"] is True
    assert post_json(api_root, GATE, {"closed": False}).json() == {"gate_closed": False}
    assert not api_ledger.gate_closed
    assert post_json(api_root, url("default", "claims/"), {"owner": "w"}).status_code == 200


@pytest.mark.parametrize("body", [{}, {"closed": "maybe"}, {"closed": None}])
def test_an_invalid_gate_call_is_400_and_changes_nothing(
    api_root: APIClient, api_ledger: Ledger, body: dict[str, Any]
) -> None:
    response = post_json(api_root, GATE, body)
    assert response.status_code == 400
    assert error_code(response) == "invalid"
    assert not api_ledger.gate_closed


def test_the_quarantine_list_shows_bytes_safely(
    api_root: APIClient, api_ledger: Ledger, redis_client: Any
) -> None:
    api_ledger.admit_many([("good", "p"), ("bad", "p")])
    redis_client.hset(api_ledger.records_key, "bad", GARBAGE + b"\xff\x00")
    api_ledger.repair()
    response = api_root.get(QUARANTINE)
    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    (entry,) = body["results"]
    assert entry["request_id"] == "bad"
    assert entry["size"] == len(GARBAGE) + 2
    assert base64.b64decode(entry["raw_base64"]) == GARBAGE + b"\xff\x00"
    assert entry["preview"] == GARBAGE.decode() + "\\xff\x00"
    assert entry["error"]


def test_a_quarantined_value_that_decodes_again_has_no_error(
    api_root: APIClient, api_ledger: Ledger, redis_client: Any
) -> None:
    admission = api_ledger.admit("back", "p")
    assert admission.record is not None
    redis_client.hset(api_ledger.quarantine_key, "back", encode_record(admission.record))
    (entry,) = api_root.get(QUARANTINE).json()["results"]
    assert entry["error"] is None


def test_the_quarantine_list_pages_through_a_large_hash(
    api_root: APIClient, api_ledger: Ledger, redis_client: Any
) -> None:
    ids = {f"q{i}" for i in range(600)}  # past hash-max-listpack-entries
    redis_client.hset(api_ledger.quarantine_key, mapping={i: GARBAGE for i in ids})
    seen: list[str] = []
    query: dict[str, Any] = {"limit": 50}
    for _ in range(100):
        body = api_root.get(QUARANTINE, query).json()
        seen += [entry["request_id"] for entry in body["results"]]
        if body["next"] is None:
            break
        query = {"limit": 50, "cursor": body["next"]}
    assert set(seen) == ids
    assert len(seen) < 2 * len(ids)


def test_a_foreign_cursor_is_refused_by_the_quarantine_list(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    api_ledger.admit_many([("a", "p"), ("b", "p")])
    cursor = api_root.get(url("default", "records/"), {"limit": 1}).json()["next"]
    response = api_root.get(QUARANTINE, {"cursor": cursor})
    assert response.status_code == 400
    assert error_code(response) == "cursor_invalid"


def test_expired_leases_come_back_through_repair(api_root: APIClient, api_ledger: Ledger) -> None:
    api_ledger.admit("r1", "p")
    claim = api_ledger.claim("w", lease=0.001)
    assert claim is not None
    deadline = time.monotonic() + LEASE_WAIT
    while api_ledger.server_time_ms() <= claim.lease_until:
        if time.monotonic() > deadline:
            pytest.fail(f"the lease did not end on the server's clock within {LEASE_WAIT}s")
        time.sleep(0.002)
    totals, _ = repair_cycle(api_root)
    assert totals["expired"] == 1
    record = api_ledger.resolve("r1")
    assert record is not None and record.state is State.PENDING
