"""API claims: claim under a lease, renew and settle by signed claim token."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger import MAX_BATCH, Ledger, State, get_ledger
from tests.support.api_helpers import error_code, post_json, url

pytest_plugins = ["tests.support.api_fixtures"]

CLAIM = url("default", "claims/")
RENEW = url("default", "claims/renew/")
RENEW_BATCH = url("default", "claims/renew/batch/")
SETTLE = url("default", "claims/settle/")
SETTLE_BATCH = url("default", "claims/settle/batch/")
HOUR_MS = 3_600_000


def claim(api_root: APIClient, owner: str = "w1", **extra: Any) -> Any:
    return post_json(api_root, CLAIM, {"owner": owner, **extra})


def claimed(
    api_root: APIClient, api_ledger: Ledger, count: int = 1, **extra: Any
) -> list[dict[str, Any]]:
    """Admit ``count`` requests and claim them all through the API."""
    api_ledger.admit_many([(f"r{i}", f"payload {i}") for i in range(count)])
    response = claim(api_root, limit=count, **extra)
    assert response.status_code == 200, response.content
    claims: list[dict[str, Any]] = response.json()["claims"]
    assert len(claims) == count
    return claims


def test_nothing_due_answers_204_with_no_body(api_root: APIClient, api_ledger: Ledger) -> None:
    response = claim(api_root)
    assert response.status_code == 204
    assert response.content == b""
    api_ledger.admit("later", "p", delay=60)
    assert claim(api_root).status_code == 204


def test_a_claim_hands_over_the_record_with_a_token(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    api_ledger.admit("r1", "the payload")
    response = claim(api_root, owner="worker-1")
    assert response.status_code == 200
    (got,) = response.json()["claims"]
    assert got["request_id"] == "r1"
    assert got["payload"] == "the payload"
    assert got["owner"] == "worker-1"
    assert got["attempt"] == 1
    assert got["fence"] >= 1
    assert got["traceparent"] is None
    assert isinstance(got["token"], str) and got["token"]
    record = api_ledger.resolve("r1")
    assert record is not None
    assert record.state is State.CLAIMED
    assert record.owner == "worker-1"
    assert record.lease_until == got["lease_until"]


def test_the_lease_defaults_to_the_queue_setting_and_may_be_given(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    api_ledger.admit_many([("a", "p"), ("b", "p")])
    first = claim(api_root).json()["claims"][0]
    now = api_ledger.server_time_ms()
    assert now + 25_000 <= first["lease_until"] <= now + 30_000
    second = claim(api_root, lease=120).json()["claims"][0]
    assert now + 115_000 <= second["lease_until"] <= api_ledger.server_time_ms() + 120_000


def test_claim_up_to_limit_earliest_due_first(api_root: APIClient, api_ledger: Ledger) -> None:
    for i in range(5):
        api_ledger.admit(f"r{i}", "p")
    response = claim(api_root, limit=3)
    ids = [c["request_id"] for c in response.json()["claims"]]
    assert ids == ["r0", "r1", "r2"]
    assert len(claim(api_root, limit=MAX_BATCH).json()["claims"]) == 2


def test_no_claim_while_the_gate_is_closed(api_root: APIClient, api_ledger: Ledger) -> None:
    api_ledger.admit("r1", "p")
    api_ledger.close_gate()
    assert claim(api_root).status_code == 204
    api_ledger.open_gate()
    assert claim(api_root).status_code == 200


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "invalid"),
        ({"owner": ""}, "invalid"),
        ({"owner": 5}, "invalid"),
        ({"owner": "a\tb"}, "owner_control_character"),
        ({"owner": "x" * 257}, "owner_too_long"),
        ({"owner": "w", "limit": 0}, "invalid"),
        ({"owner": "w", "limit": MAX_BATCH + 1}, "invalid"),
        ({"owner": "w", "lease": 0}, "invalid"),
        ({"owner": "w", "lease": -5}, "invalid"),
    ],
)
def test_invalid_claims_are_400_and_claim_nothing(
    api_root: APIClient, api_ledger: Ledger, body: dict[str, Any], code: str
) -> None:
    api_ledger.admit("r1", "p")
    response = post_json(api_root, CLAIM, body)
    assert response.status_code == 400
    assert error_code(response) == code
    record = api_ledger.resolve("r1")
    assert record is not None and record.state is State.PENDING


# -- renew and settle -----------------------------------------------------------------


def test_renew_extends_the_lease(api_root: APIClient, api_ledger: Ledger) -> None:
    (got,) = claimed(api_root, api_ledger, lease=10)
    response = post_json(api_root, RENEW, {"token": got["token"], "lease": 600})
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "RENEWED"
    assert body["reason"] is None
    assert body["record"]["lease_until"] > got["lease_until"] + 500_000
    record = api_ledger.resolve("r0")
    assert record is not None and record.lease_until == body["record"]["lease_until"]
    # The same token still settles after a renewal.
    assert post_json(api_root, SETTLE, {"token": got["token"]}).status_code == 200


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED"])
def test_settle_ends_the_record(api_root: APIClient, api_ledger: Ledger, state: str) -> None:
    (got,) = claimed(api_root, api_ledger)
    response = post_json(api_root, SETTLE, {"token": got["token"], "state": state})
    assert response.status_code == 200
    assert response.json()["status"] == "SETTLED"
    assert response.json()["record"]["state"] == state
    record = api_ledger.resolve("r0")
    assert record is not None and record.state is State(state)


def test_settle_defaults_to_completed(api_root: APIClient, api_ledger: Ledger) -> None:
    (got,) = claimed(api_root, api_ledger)
    assert (
        post_json(api_root, SETTLE, {"token": got["token"]}).json()["record"]["state"]
        == "COMPLETED"
    )


def test_settle_pending_gives_the_record_back_after_delay(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    (got,) = claimed(api_root, api_ledger)
    response = post_json(api_root, SETTLE, {"token": got["token"], "state": "PENDING", "delay": 30})
    record = response.json()["record"]
    assert record["state"] == "PENDING"
    assert record["due_at"] == record["updated_at"] + 30_000
    assert claim(api_root).status_code == 204


def test_a_replayed_settlement_answers_the_same_again(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    (got,) = claimed(api_root, api_ledger)
    first = post_json(api_root, SETTLE, {"token": got["token"], "state": "COMPLETED"})
    again = post_json(api_root, SETTLE, {"token": got["token"], "state": "COMPLETED"})
    assert again.status_code == 200
    assert again.json() == first.json()


def test_settling_an_ended_claim_another_way_is_409_claim_lost(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    (got,) = claimed(api_root, api_ledger)
    post_json(api_root, SETTLE, {"token": got["token"], "state": "COMPLETED"})
    response = post_json(api_root, SETTLE, {"token": got["token"], "state": "FAILED"})
    assert response.status_code == 409
    assert error_code(response) == "claim_lost"
    assert response.json()["error"]["details"] == {"request_id": "r0", "reason": "not_claimed"}
    record = api_ledger.resolve("r0")
    assert record is not None and record.state is State.COMPLETED


def test_an_expired_lease_is_409_claim_lost_never_a_silent_success(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    (got,) = claimed(api_root, api_ledger, lease=0.001)
    deadline = time.monotonic() + 5
    while api_ledger.server_time_ms() <= got["lease_until"]:
        if time.monotonic() > deadline:
            pytest.fail("the lease did not end on the server's clock within 5s")
        time.sleep(0.005)
    for path, body in ((RENEW, {"token": got["token"]}), (SETTLE, {"token": got["token"]})):
        response = post_json(api_root, path, body)
        assert response.status_code == 409
        assert error_code(response) == "claim_lost"
        assert response.json()["error"]["details"]["reason"] == "lease_expired"
    record = api_ledger.resolve("r0")
    assert record is not None and record.state is State.CLAIMED


def test_a_claim_taken_over_by_another_worker_is_409_superseded(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    (got,) = claimed(api_root, api_ledger)
    later = get_ledger("default")
    later.clock_skew_ms = HOUR_MS  # an hour on: the lease has run out
    later.repair()
    other = later.claim("w2")
    assert other is not None and other.fence > got["fence"]
    response = post_json(api_root, SETTLE, {"token": got["token"]})
    assert response.status_code == 409
    assert response.json()["error"]["details"] == {"request_id": "r0", "reason": "superseded"}
    record = api_ledger.resolve("r0")
    assert record is not None and record.owner == "w2"


def test_a_purged_record_is_409_missing(
    api_root: APIClient, api_ledger: Ledger, redis_client: Any
) -> None:
    (got,) = claimed(api_root, api_ledger)
    redis_client.hdel(api_ledger.records_key, "r0")
    response = post_json(api_root, SETTLE, {"token": got["token"]})
    assert response.status_code == 409
    assert response.json()["error"]["details"]["reason"] == "missing"


def altered(token: str) -> str:
    """Change one character of the signed part of ``token``."""
    position = len(token) // 3
    replacement = "A" if token[position] != "A" else "B"
    return token[:position] + replacement + token[position + 1 :]


# -- batches ------------------------------------------------------------------------------


def test_settle_batch_answers_each_item_and_reports_lost_ones(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    claims = claimed(api_root, api_ledger, count=4)
    post_json(api_root, SETTLE, {"token": claims[3]["token"], "state": "COMPLETED"})
    items = [
        {"token": claims[0]["token"], "state": "COMPLETED"},
        {"token": claims[1]["token"], "state": "FAILED"},
        {"token": claims[2]["token"], "state": "PENDING", "delay": 60},
        {"token": claims[3]["token"], "state": "FAILED"},
    ]
    response = post_json(api_root, SETTLE_BATCH, {"items": items})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["SETTLED", "SETTLED", "SETTLED", "LOST"]
    assert [r["record"] and r["record"]["state"] for r in results] == [
        "COMPLETED",
        "FAILED",
        "PENDING",
        None,
    ]
    assert results[3]["reason"] == "not_claimed"


def test_one_forged_token_refuses_the_whole_settle_batch(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    claims = claimed(api_root, api_ledger, count=2)
    items = [{"token": claims[0]["token"]}, {"token": altered(claims[1]["token"])}]
    response = post_json(api_root, SETTLE_BATCH, {"items": items})
    assert response.status_code == 400
    assert error_code(response) == "claim_token_invalid"
    assert response.json()["error"]["details"] == {"index": 1}
    assert {r.state for r in api_ledger.resolve_many(["r0", "r1"]) if r} == {State.CLAIMED}


def test_renew_batch_answers_each_item(api_root: APIClient, api_ledger: Ledger) -> None:
    claims = claimed(api_root, api_ledger, count=2, lease=10)
    post_json(api_root, SETTLE, {"token": claims[1]["token"]})
    items = [{"token": claims[0]["token"], "lease": 600}, {"token": claims[1]["token"]}]
    response = post_json(api_root, RENEW_BATCH, {"items": items})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["RENEWED", "LOST"]
    assert results[0]["record"]["lease_until"] > claims[0]["lease_until"] + 500_000


def test_one_forged_token_refuses_the_whole_renew_batch(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    claims = claimed(api_root, api_ledger, count=2)
    items = [{"token": claims[0]["token"]}, {"token": "forged"}]
    response = post_json(api_root, RENEW_BATCH, {"items": items})
    assert response.status_code == 400
    assert error_code(response) == "claim_token_invalid"


@pytest.mark.parametrize("path", [RENEW_BATCH, SETTLE_BATCH])
def test_a_batch_of_129_tokens_is_413(api_root: APIClient, api_ledger: Ledger, path: str) -> None:
    (got,) = claimed(api_root, api_ledger)
    response = post_json(api_root, path, {"items": [{"token": got["token"]}] * (MAX_BATCH + 1)})
    assert response.status_code == 413
    assert error_code(response) == "batch_too_large"
    record = api_ledger.resolve("r0")
    assert record is not None and record.state is State.CLAIMED


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (SETTLE, {}),
        (SETTLE, {"token": 5}),
        (SETTLE, {"token": "t", "state": "DEAD"}),
        (SETTLE, {"token": "t", "state": "CLAIMED"}),
        (SETTLE, {"token": "t", "delay": -1}),
        (RENEW, {"token": "t", "lease": 0}),
        (RENEW_BATCH, {"items": []}),
        (SETTLE_BATCH, {"items": [{}]}),
        (SETTLE_BATCH, {"items": "nope"}),
    ],
)
def test_invalid_renewals_and_settlements_are_400(
    api_root: APIClient, path: str, body: dict[str, Any]
) -> None:
    response = post_json(api_root, path, body)
    assert response.status_code == 400
    assert error_code(response) == "invalid"


def test_a_whole_worker_loop_over_http(api_root: APIClient, api_ledger: Ledger) -> None:
    api_ledger.admit_many([(f"job-{i}", str(i)) for i in range(10)])
    done = 0
    for _ in range(10):  # 4 rounds of 3 suffice: a loop that never ends fails instead
        response = claim(api_root, owner="loop", limit=3)
        if response.status_code != 200:
            break
        items = [{"token": c["token"]} for c in response.json()["claims"]]
        results = post_json(api_root, SETTLE_BATCH, {"items": items}).json()["results"]
        done += sum(r["status"] == "SETTLED" for r in results)
    assert response.status_code == 204
    assert done == 10
    assert api_ledger.stats().completed == 10


def test_an_old_token_cannot_settle_a_purged_and_readmitted_record(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    from django_ledger import operations

    (old,) = claimed(api_root, api_ledger)
    assert post_json(api_root, SETTLE, {"token": old["token"]}).status_code == 200
    shown = operations.snapshot(api_ledger, "r0")
    assert shown is not None
    operations.purge(api_ledger, "r0", shown.version)  # the admin's Purge
    api_ledger.admit("r0", "payload again")
    response = claim(api_root)
    assert response.status_code == 200, response.content
    (new,) = response.json()["claims"]
    assert new["request_id"] == "r0" and new["fence"] > old["fence"]
    assert new["token"] != old["token"]
    stale = post_json(api_root, SETTLE, {"token": old["token"]})
    assert stale.status_code == 409 and error_code(stale) == "claim_lost"
    record = api_ledger.resolve("r0")
    assert record is not None and record.state is State.CLAIMED
    assert post_json(api_root, SETTLE, {"token": new["token"]}).status_code == 200
