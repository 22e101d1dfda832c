"""API admission: one request or a batch, every answer and every refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger import MAX_BATCH, MAX_BATCH_BYTES, Ledger, State
from tests.support.api_helpers import error_code, post_raw, url
from tests.support.ledger_helpers import GARBAGE, TRACEPARENT
from tests.support.redis_server import free_port

pytest_plugins = ["tests.support.api_fixtures"]

ADMIT = url("default", "admit/")
BATCH = url("default", "admit/batch/")


def admit(api_root: APIClient, body: Any, **headers: str) -> Any:
    return api_root.post(ADMIT, body, format="json", headers=headers)


def queue_overrides(settings: Any, **overrides: Any) -> None:
    queues = dict(settings.LEDGER["QUEUES"])
    queues["default"] = {**queues.get("default", {}), **overrides}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues}


def test_a_new_request_is_admitted_with_201_and_its_record(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    response = admit(api_root, {"request_id": "r1", "payload": '{"to": "a@example.com"}'})
    assert response.status_code == 201
    body = response.json()
    assert body["request_id"] == "r1"
    assert body["status"] == "ADMITTED"
    assert body["reason"] is None
    record = body["record"]
    assert record["state"] == "PENDING"
    assert record["payload"] == '{"to": "a@example.com"}'
    assert record["due_at"] == record["created_at"]
    assert record["lease_until"] is None
    stored = api_ledger.resolve("r1")
    assert stored is not None and stored.state is State.PENDING
    assert stored.created_at == record["created_at"]


def test_the_same_request_again_answers_200_with_the_stored_record(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    first = admit(api_root, {"request_id": "r1", "payload": "p"}).json()
    again = admit(api_root, {"request_id": "r1", "payload": "p"})
    assert again.status_code == 200
    assert again.json()["status"] == "DUPLICATE"
    assert again.json()["record"] == first["record"]


def test_a_duplicate_after_settlement_still_answers_200_with_the_ended_record(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    admit(api_root, {"request_id": "r1", "payload": "p"})
    claim = api_ledger.claim("w")
    assert claim is not None
    api_ledger.settle(claim)
    again = admit(api_root, {"request_id": "r1", "payload": "p"})
    assert again.status_code == 200
    assert again.json()["record"]["state"] == "COMPLETED"


def test_the_same_id_with_another_payload_is_a_409_conflict(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    admit(api_root, {"request_id": "r1", "payload": "p"})
    response = admit(api_root, {"request_id": "r1", "payload": "other"})
    assert response.status_code == 409
    assert error_code(response) == "payload_differs"
    assert response.json()["error"]["details"] == {"request_id": "r1", "reason": "payload_differs"}
    stored = api_ledger.resolve("r1")
    assert stored is not None and stored.payload == "p"


def test_an_id_with_corrupt_bytes_is_a_409_corrupt_then_quarantined(
    api_root: APIClient, api_ledger: Ledger, redis_client: Any
) -> None:
    redis_client.hset(api_ledger.records_key, "r1", GARBAGE)
    response = admit(api_root, {"request_id": "r1", "payload": "p"})
    assert response.status_code == 409
    assert error_code(response) == "corrupt"
    api_ledger.repair()
    response = admit(api_root, {"request_id": "r1", "payload": "p"})
    assert response.status_code == 409
    assert error_code(response) == "quarantined"


def test_the_idempotency_key_header_is_the_request_id(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    response = admit(api_root, {"payload": "p"}, **{"Idempotency-Key": "key-1"})
    assert response.status_code == 201
    assert response.json()["request_id"] == "key-1"
    assert api_ledger.resolve("key-1") is not None
    again = admit(api_root, {"payload": "p"}, **{"Idempotency-Key": "key-1"})
    assert again.status_code == 200


def test_a_header_and_a_body_id_that_agree_are_accepted(api_root: APIClient) -> None:
    response = admit(api_root, {"request_id": "k", "payload": "p"}, **{"Idempotency-Key": "k"})
    assert response.status_code == 201


def test_a_header_and_a_body_id_that_differ_are_refused(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    response = admit(api_root, {"request_id": "a", "payload": "p"}, **{"Idempotency-Key": "b"})
    assert response.status_code == 400
    assert error_code(response) == "idempotency_key_mismatch"
    assert api_ledger.stats().total == 0


def test_no_request_id_at_all_is_invalid(api_root: APIClient) -> None:
    response = admit(api_root, {"payload": "p"})
    assert response.status_code == 400
    assert error_code(response) == "invalid"
    assert "request_id" in response.json()["error"]["details"]


def test_an_empty_request_id_is_id_empty_wherever_it_is_sent(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    in_body = admit(api_root, {"request_id": "", "payload": "p"})
    in_header = admit(api_root, {"payload": "p"}, **{"Idempotency-Key": ""})
    for response in (in_body, in_header):
        assert response.status_code == 400
        assert error_code(response) == "id_empty"
        assert response.json()["error"]["details"] == {"request_id": "", "reason": "id_empty"}
    batch = api_root.post(
        BATCH,
        {"items": [{"request_id": "", "payload": "p"}, {"request_id": "r1", "payload": "p"}]},
        format="json",
    )
    assert batch.status_code == 200
    first, second = batch.json()["results"]
    assert (first["status"], first["reason"]) == ("REJECTED", "id_empty")
    assert second["status"] == "ADMITTED"
    assert api_ledger.stats().total == 1


def test_a_payload_over_the_queue_limit_is_413(
    api_root: APIClient, api_ledger: Ledger, settings: Any
) -> None:
    queue_overrides(settings, MAX_PAYLOAD_BYTES=10)
    response = admit(api_root, {"request_id": "r1", "payload": "x" * 11})
    assert response.status_code == 413
    assert error_code(response) == "payload_too_large"
    # The message says the limit, in words a person reads.
    assert "limit of 10 bytes" in response.json()["error"]["message"]
    assert admit(api_root, {"request_id": "r1", "payload": "x" * 10}).status_code == 201


def test_a_body_far_over_any_payload_is_refused_before_it_is_read(
    api_root: APIClient, settings: Any
) -> None:
    queue_overrides(settings, MAX_PAYLOAD_BYTES=10)
    body = json.dumps({"request_id": "r1", "payload": "x" * 200_000})
    response = api_root.generic("POST", ADMIT, body, content_type="application/json")
    assert response.status_code == 413
    assert error_code(response) == "body_too_large"


def test_a_full_ledger_answers_503_with_retry_after(
    api_root: APIClient, api_ledger: Ledger, settings: Any
) -> None:
    queue_overrides(settings, MAX_RECORDS=1)
    assert admit(api_root, {"request_id": "r1", "payload": "p"}).status_code == 201
    response = admit(api_root, {"request_id": "r2", "payload": "p"})
    assert response.status_code == 503
    assert error_code(response) == "ledger_full"
    assert response["Retry-After"] == "5"
    # A duplicate of a stored request is still answered while full.
    assert admit(api_root, {"request_id": "r1", "payload": "p"}).status_code == 200


def test_retry_after_of_a_full_ledger_follows_the_setting(
    api_root: APIClient, settings: Any
) -> None:
    queue_overrides(settings, MAX_RECORDS=1)
    settings.LEDGER = {**settings.LEDGER, "API": {"FULL_RETRY_AFTER": 30}}
    admit(api_root, {"request_id": "r1", "payload": "p"})
    assert admit(api_root, {"request_id": "r2", "payload": "p"})["Retry-After"] == "30"


def test_delay_and_traceparent_are_stored(api_root: APIClient) -> None:
    response = admit(
        api_root, {"request_id": "r1", "payload": "p", "delay": 2.5, "traceparent": TRACEPARENT}
    )
    record = response.json()["record"]
    assert record["due_at"] == record["created_at"] + 2500
    assert record["traceparent"] == TRACEPARENT


def test_payload_text_is_kept_exactly(api_root: APIClient, api_ledger: Ledger) -> None:
    payload = "  NUL\x00 newline\n emoji \U0001f600  "
    response = admit(api_root, {"request_id": " spaced id ", "payload": payload})
    assert response.status_code == 201
    assert response.json()["record"]["payload"] == payload
    stored = api_ledger.resolve(" spaced id ")
    assert stored is not None and stored.payload == payload


def test_an_empty_payload_is_a_payload(api_root: APIClient) -> None:
    assert admit(api_root, {"request_id": "r1", "payload": ""}).status_code == 201


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"request_id": "r1"}, "invalid"),
        ({"request_id": "r1", "payload": 12}, "invalid"),
        ({"request_id": 12, "payload": "p"}, "invalid"),
        ({"request_id": "r1", "payload": None}, "invalid"),
        ({"request_id": "r1", "payload": "p", "delay": -1}, "invalid"),
        ({"request_id": "r1", "payload": "p", "delay": "soon"}, "invalid"),
        ({"request_id": "r1", "payload": "p", "delay": 1e12}, "invalid"),
        ({"request_id": "r1", "payload": "p", "traceparent": "nope"}, "traceparent_invalid"),
        ({"request_id": "", "payload": "p"}, "id_empty"),
        ({"request_id": "a\nb", "payload": "p"}, "id_control_character"),
        ({"request_id": "a\x00b", "payload": "p"}, "id_control_character"),
        ({"request_id": "x" * 257, "payload": "p"}, "id_too_long"),
        ('{"request_id": "r1", "payload": "\\ud800"}', "invalid"),
        (["r1", "p"], "invalid"),
        ('"r1"', "invalid"),
    ],
)
def test_invalid_admissions_are_400_with_a_code_and_write_nothing(
    api_root: APIClient, api_ledger: Ledger, body: Any, code: str
) -> None:
    response = post_raw(api_root, ADMIT, body) if isinstance(body, str) else admit(api_root, body)
    assert response.status_code == 400, response.content
    assert error_code(response) == code
    assert api_ledger.stats().total == 0


def test_a_body_that_is_not_json_is_a_parse_error(api_root: APIClient) -> None:
    response = api_root.generic("POST", ADMIT, "{not json", content_type="application/json")
    assert response.status_code == 400
    assert error_code(response) == "parse_error"


def test_a_form_body_is_an_unsupported_media_type(api_root: APIClient) -> None:
    response = api_root.post(ADMIT, {"request_id": "r1", "payload": "p"})
    assert response.status_code == 415
    assert error_code(response) == "unsupported_media_type"


def test_get_on_admit_is_method_not_allowed(api_root: APIClient) -> None:
    response = api_root.get(ADMIT)
    assert response.status_code == 405
    assert error_code(response) == "method_not_allowed"


# -- batches -------------------------------------------------------------------------


def batch(api_root: APIClient, items: list[dict[str, Any]]) -> Any:
    return api_root.post(BATCH, {"items": items}, format="json")


def test_a_batch_answers_each_item_in_order(api_root: APIClient, api_ledger: Ledger) -> None:
    admit(api_root, {"request_id": "dup", "payload": "p"})
    admit(api_root, {"request_id": "clash", "payload": "p"})
    response = batch(
        api_root,
        [
            {"request_id": "new", "payload": "p"},
            {"request_id": "dup", "payload": "p"},
            {"request_id": "clash", "payload": "other"},
            {"request_id": "bad\n", "payload": "p"},
        ],
    )
    assert response.status_code == 200
    results = response.json()["results"]
    assert [(r["request_id"], r["status"], r["reason"]) for r in results] == [
        ("new", "ADMITTED", None),
        ("dup", "DUPLICATE", None),
        ("clash", "CONFLICT", "payload_differs"),
        ("bad\n", "REJECTED", "id_control_character"),
    ]
    assert results[0]["record"]["state"] == "PENDING"
    assert results[1]["record"]["payload"] == "p"
    assert results[3]["record"] is None
    assert api_ledger.stats().total == 3


def test_a_batch_of_max_batch_items_is_admitted(api_root: APIClient, api_ledger: Ledger) -> None:
    items = [{"request_id": f"r{i}", "payload": "p"} for i in range(MAX_BATCH)]
    response = batch(api_root, items)
    assert response.status_code == 200
    assert {r["status"] for r in response.json()["results"]} == {"ADMITTED"}
    assert api_ledger.stats().total == MAX_BATCH


def test_a_batch_of_129_is_refused_whole_with_413(api_root: APIClient, api_ledger: Ledger) -> None:
    items = [{"request_id": f"r{i}", "payload": "p"} for i in range(MAX_BATCH + 1)]
    response = batch(api_root, items)
    assert response.status_code == 413
    assert error_code(response) == "batch_too_large"
    assert response.json()["error"]["details"] == {"max_items": MAX_BATCH, "items": MAX_BATCH + 1}
    assert api_ledger.stats().total == 0


def test_a_batch_over_max_batch_bytes_is_refused_whole_with_413(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    payload = "x" * (MAX_BATCH_BYTES // 2)
    items = [{"request_id": "a", "payload": payload}, {"request_id": "b", "payload": payload}]
    response = batch(api_root, items)
    assert response.status_code == 413
    assert error_code(response) == "batch_too_large"
    assert response.json()["error"]["details"]["max_bytes"] == MAX_BATCH_BYTES
    assert api_ledger.stats().total == 0


def test_a_batch_just_under_max_batch_bytes_is_admitted(
    api_root: APIClient, api_ledger: Ledger
) -> None:
    payload = "x" * (MAX_BATCH_BYTES // 2 - 1)
    items = [{"request_id": "a", "payload": payload}, {"request_id": "b", "payload": payload}]
    response = batch(api_root, items)
    assert response.status_code == 200
    assert api_ledger.stats().total == 2


def test_items_keep_their_own_delay_and_traceparent(api_root: APIClient) -> None:
    response = batch(
        api_root,
        [
            {"request_id": "now", "payload": "p"},
            {"request_id": "later", "payload": "p", "delay": 60},
            {"request_id": "traced", "payload": "p", "traceparent": TRACEPARENT},
            {"request_id": "also-now", "payload": "p"},
        ],
    )
    records = {r["request_id"]: r["record"] for r in response.json()["results"]}
    assert records["now"]["due_at"] == records["now"]["created_at"]
    assert records["later"]["due_at"] == records["later"]["created_at"] + 60_000
    assert records["traced"]["traceparent"] == TRACEPARENT
    assert records["also-now"]["traceparent"] is None


def test_a_batch_into_a_full_ledger_answers_full_per_item(
    api_root: APIClient, api_ledger: Ledger, settings: Any
) -> None:
    queue_overrides(settings, MAX_RECORDS=2)
    response = batch(api_root, [{"request_id": f"r{i}", "payload": "p"} for i in range(3)])
    assert response.status_code == 200
    statuses = [r["status"] for r in response.json()["results"]]
    assert statuses == ["ADMITTED", "ADMITTED", "FULL"]


@pytest.mark.parametrize(
    "body",
    [
        {"items": []},
        {"items": "r1"},
        {},
        {"items": [{"payload": "p"}]},
        {"items": [{"request_id": "r1", "payload": "p"}, {"request_id": "r2"}]},
    ],
)
def test_an_invalid_batch_is_400_and_admits_nothing(
    api_root: APIClient, api_ledger: Ledger, body: Any
) -> None:
    response = api_root.post(BATCH, body, format="json")
    assert response.status_code == 400
    assert error_code(response) == "invalid"
    assert api_ledger.stats().total == 0


def test_an_unknown_queue_is_404(api_root: APIClient) -> None:
    response = api_root.post(
        url("nope", "admit/"), {"request_id": "r", "payload": "p"}, format="json"
    )
    assert response.status_code == 404
    assert error_code(response) == "queue_not_found"


def test_an_accept_header_the_api_cannot_serve_is_406(api_root: APIClient) -> None:
    response = api_root.post(
        ADMIT, {"request_id": "r1", "payload": "p"}, format="json", headers={"Accept": "text/csv"}
    )
    assert response.status_code == 406
    assert error_code(response) == "not_acceptable"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", ADMIT, {"request_id": "r1", "payload": "p"}),
        ("post", url("default", "claims/"), {"owner": "w"}),
        ("get", url("default", "stats/"), None),
        ("get", "/api/dispatch/check/", {"key": "k", "fire_time": 1}),
    ],
)
def test_redis_unreachable_answers_503_with_retry_after(
    api_root: APIClient, settings: Any, method: str, path: str, body: Any
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    settings.LEDGER = {**settings.LEDGER, "CONNECTION": dead, "DISPATCH": {"CONNECTION": dead}}
    if method == "post":
        response = api_root.post(path, body, format="json")
    else:
        response = api_root.get(path, body)
    assert response.status_code == 503
    assert error_code(response) == "ledger_unavailable"
    assert response["Retry-After"] == "1"


def test_a_priority_orders_claims_and_is_checked(api_root: APIClient, api_ledger: Ledger) -> None:
    assert admit(api_root, {"request_id": "low", "payload": "x"}).status_code == 201
    assert (
        admit(api_root, {"request_id": "high", "payload": "x", "priority": 50}).status_code == 201
    )
    bad = admit(api_root, {"request_id": "bad", "payload": "x", "priority": 101})
    assert bad.status_code == 400 and "priority" in bad.json()["error"]["details"]
    record = api_ledger.resolve("high")
    assert record is not None and record.priority == 50
    claim = api_ledger.claim("w")
    assert claim is not None and claim.request_id == "high"
