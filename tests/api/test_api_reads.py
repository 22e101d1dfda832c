"""API reads: resolve one or many, list records by state with an opaque cursor, stats."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from rest_framework.test import APIClient

from django_ledger import MAX_BATCH, Ledger, State
from tests.support.api_helpers import error_code, url
from tests.support.ledger_helpers import GARBAGE

pytest_plugins = ["tests.support.api_fixtures"]

RECORDS = url("default", "records/")
RESOLVE = url("default", "resolve/")


def record_url(request_id: str) -> str:
    return RECORDS + quote(request_id, safe="/")


# -- one record -----------------------------------------------------------------------


def test_resolve_one_record(api_root: APIClient, api_ledger: Ledger) -> None:
    api_ledger.admit("r1", "payload")
    response = api_root.get(record_url("r1"))
    assert response.status_code == 200
    body = response.json()
    stored = api_ledger.resolve("r1")
    assert stored is not None
    assert body == {
        "request_id": "r1",
        "payload": "payload",
        "state": "PENDING",
        "due_at": stored.due_at,
        "owner": "",
        "attempts": 0,
        "fence": 0,
        "lease_until": None,
        "created_at": stored.created_at,
        "updated_at": stored.updated_at,
        "traceparent": None,
        "priority": 0,
    }


@pytest.mark.parametrize("request_id", ["a/b", "päyload ✓", "with space", "x?y#z", "100%"])
def test_resolve_ids_that_need_encoding(
    api_root: APIClient, api_ledger: Ledger, request_id: str
) -> None:
    api_ledger.admit(request_id, "p")
    response = api_root.get(record_url(request_id))
    assert response.status_code == 200
    assert response.json()["request_id"] == request_id


def test_a_missing_record_is_404(api_root: APIClient) -> None:
    response = api_root.get(record_url("nope"))
    assert response.status_code == 404
    assert error_code(response) == "record_not_found"


def test_a_corrupt_record_is_409_record_corrupt(
    api_root: APIClient, api_ledger: Ledger, redis_client: Any
) -> None:
    redis_client.hset(api_ledger.records_key, "bad", GARBAGE)
    response = api_root.get(record_url("bad"))
    assert response.status_code == 409
    assert error_code(response) == "record_corrupt"
    assert response.json()["error"]["details"]["request_id"] == "bad"


@pytest.mark.parametrize(
    ("request_id", "code"), [("a\nb", "id_control_character"), ("x" * 257, "id_too_long")]
)
def test_an_unusable_id_is_400(api_root: APIClient, request_id: str, code: str) -> None:
    response = api_root.get(record_url(request_id))
    assert response.status_code == 400
    assert error_code(response) == code


# -- many records -------------------------------------------------------------------


def test_resolve_many_answers_each_id_in_order(
    api_root: APIClient, api_ledger: Ledger, redis_client: Any
) -> None:
    api_ledger.admit_many([("a", "1"), ("b,c", "2")])
    redis_client.hset(api_ledger.records_key, "bad", GARBAGE)
    response = api_root.get(RESOLVE, {"ids": ["b,c", "missing", "bad", "a"]})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [(r["request_id"], r["status"]) for r in results] == [
        ("b,c", "FOUND"),
        ("missing", "MISSING"),
        ("bad", "CORRUPT"),
        ("a", "FOUND"),
    ]
    assert results[0]["record"]["payload"] == "2"
    assert results[1]["record"] is None
    assert results[2]["reason"] == "checksum mismatch" or results[2]["reason"]


def test_resolve_many_wants_one_to_max_batch_ids(api_root: APIClient) -> None:
    assert error_code(api_root.get(RESOLVE)) == "invalid"
    too_many = api_root.get(RESOLVE, {"ids": [f"r{i}" for i in range(MAX_BATCH + 1)]})
    assert too_many.status_code == 400
    assert error_code(too_many) == "invalid"
    assert api_root.get(RESOLVE, {"ids": [f"r{i}" for i in range(MAX_BATCH)]}).status_code == 200


def test_resolve_many_refuses_an_unusable_id_by_index(api_root: APIClient) -> None:
    response = api_root.get(RESOLVE, {"ids": ["ok", "a\x01b"]})
    assert response.status_code == 400
    assert error_code(response) == "id_control_character"
    assert response.json()["error"]["details"] == {"index": 1}


# -- listing ------------------------------------------------------------------------


def flat(pages: list[list[str]]) -> list[str]:
    return [request_id for page in pages for request_id in page]


def walk(api_root: APIClient, **params: Any) -> list[list[str]]:
    """Follow cursors to the end; return the ids of every page."""
    pages: list[list[str]] = []
    query = dict(params)
    for _ in range(100):
        response = api_root.get(RECORDS, query)
        assert response.status_code == 200, response.content
        body = response.json()
        pages.append([r["request_id"] for r in body["results"]])
        if body["next"] is None:
            return pages
        query = {**params, "cursor": body["next"]}
    raise AssertionError("the cursor never ended")


def test_pending_records_oldest_first_then_newest_first(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    for i in range(7):
        api_ledger.admit(f"r{i}", "p", delay=i)
    pages = walk(api_root, limit=3)
    assert pages == [["r0", "r1", "r2"], ["r3", "r4", "r5"], ["r6"]]
    newest = walk(api_root, limit=3, order="newest")
    assert newest == [["r6", "r5", "r4"], ["r3", "r2", "r1"], ["r0"]]


def test_records_sharing_a_due_time_page_without_loss(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    ids = [f"r{i:02d}" for i in range(10)]
    api_ledger.admit_many([(i, "p") for i in ids])  # one script call: one due time
    assert flat(walk(api_root, limit=3)) == ids
    assert flat(walk(api_root, limit=4, order="newest")) == ids[::-1]


@pytest.mark.parametrize("order", ["oldest", "newest"])
@pytest.mark.parametrize("same_time", [True, False])
def test_a_cursor_survives_its_record_leaving_the_index(
    api_root: APIClient, api_ledger: Ledger, order: str, same_time: bool
) -> None:
    ids = [f"r{i:02d}" for i in range(9)]
    if same_time:
        api_ledger.admit_many([(i, "p") for i in ids])
    else:
        for n, i in enumerate(ids):
            api_ledger.admit(i, "p", delay=n)
    expected = ids if order == "oldest" else ids[::-1]
    first = api_root.get(RECORDS, {"limit": 3, "order": order}).json()
    assert [r["request_id"] for r in first["results"]] == expected[:3]
    # The last record of the page is claimed (it leaves the ready index) before the
    # next page is read; the next page must start right after it all the same.
    api_ledger.redis.zrem(api_ledger.ready_key, expected[2])
    second = api_root.get(RECORDS, {"limit": 3, "order": order, "cursor": first["next"]}).json()
    assert [r["request_id"] for r in second["results"]] == expected[3:6]


def test_claimed_and_ended_records_are_listed_by_state(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    api_ledger.admit_many([(f"r{i}", "p") for i in range(4)])
    claims = api_ledger.claim_many("w", 3)
    api_ledger.settle(claims[0], State.COMPLETED)
    api_ledger.settle(claims[1], State.FAILED)

    def listed(state: str) -> list[str]:
        return flat(walk(api_root, state=state))

    assert listed("PENDING") == ["r3"]
    assert listed("CLAIMED") == ["r2"]
    assert listed("COMPLETED") == ["r0"]
    assert listed("FAILED") == ["r1"]
    assert listed("DEAD") == []
    (record,) = api_root.get(RECORDS, {"state": "CLAIMED"}).json()["results"]
    assert record["owner"] == "w" and record["state"] == "CLAIMED"


def test_index_entries_without_a_good_record_are_skipped(
    api_root: APIClient, api_ledger: Ledger, redis_client: Any
) -> None:
    api_ledger.admit_many([("a", "p"), ("b", "p"), ("c", "p")])
    redis_client.hdel(api_ledger.records_key, "a")
    redis_client.hset(api_ledger.records_key, "b", GARBAGE)
    assert flat(walk(api_root)) == ["c"]


def test_the_page_size_has_a_default_and_a_maximum(
    api_root: APIClient, api_ledger: Ledger, settings: Any
) -> None:
    api_ledger.admit_many([(f"r{i:02d}", "p") for i in range(25)])
    assert len(api_root.get(RECORDS).json()["results"]) == 20
    settings.LEDGER = {**settings.LEDGER, "API": {"PAGE_SIZE": 2, "MAX_PAGE_SIZE": 5}}
    assert len(api_root.get(RECORDS).json()["results"]) == 2
    assert len(api_root.get(RECORDS, {"limit": 50}).json()["results"]) == 5


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"state": "LOST"}, "invalid"),
        ({"order": "random"}, "invalid"),
        ({"limit": 0}, "invalid"),
        ({"limit": "many"}, "invalid"),
        ({"limit": "\u00b2"}, "invalid"),  # a digit to str.isdigit, no number to int()
        ({"cursor": "garbage"}, "cursor_invalid"),
    ],
)
def test_invalid_listings_are_400(api_root: APIClient, params: dict[str, Any], code: str) -> None:
    response = api_root.get(RECORDS, params)
    assert response.status_code == 400
    assert error_code(response) == code


def test_a_cursor_only_works_on_its_own_listing(api_root: APIClient, api_ledger: Ledger) -> None:
    api_ledger.admit_many([(f"r{i}", "p") for i in range(3)])
    cursor = api_root.get(RECORDS, {"limit": 1}).json()["next"]
    assert cursor is not None
    for params in ({"order": "newest"}, {"state": "CLAIMED"}):
        response = api_root.get(RECORDS, {**params, "cursor": cursor})
        assert error_code(response) == "cursor_invalid"
    other_queue = api_root.get(url("emails", "records/"), {"cursor": cursor})
    assert error_code(other_queue) == "cursor_invalid"
    tampered = cursor[:5] + ("A" if cursor[5] != "A" else "B") + cursor[6:]
    assert error_code(api_root.get(RECORDS, {"cursor": tampered})) == "cursor_invalid"


# -- stats ----------------------------------------------------------------------------


def test_stats_count_every_state(api_root: APIClient, api_ledger: Ledger) -> None:
    api_ledger.admit_many([(f"r{i}", "p") for i in range(5)])
    api_ledger.admit("later", "p", delay=60)
    claims = api_ledger.claim_many("w", 3)
    api_ledger.settle(claims[0])
    api_ledger.settle(claims[1], State.FAILED)
    api_ledger.close_gate()
    response = api_root.get(url("default", "stats/"))
    assert response.status_code == 200
    body = response.json()
    assert body["queue"] == "default"
    counts = {key: body[key] for key in ("pending_due", "pending_later", "claimed", "completed")}
    assert counts == {"pending_due": 2, "pending_later": 1, "claimed": 1, "completed": 1}
    assert (body["failed"], body["dead"], body["quarantined"], body["total"]) == (1, 0, 0, 6)
    assert body["gate_closed"] is True
    assert body["oldest_due_age_ms"] >= 0
    assert body["now"] >= api_ledger.stats().now - 60_000
