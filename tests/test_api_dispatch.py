"""API dispatch registry: log, find, check and claim cron fires."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger.conf import dispatch_node_id
from tests.api_helpers import error_code, post_json

pytest_plugins = ["tests.api_fixtures"]

LOG = "/api/dispatch/log/"
FIND = "/api/dispatch/find/"
CHECK = "/api/dispatch/check/"
CLAIM = "/api/dispatch/claim/"
FIRE = 1_704_110_400  # 2024-01-01T12:00:00Z


def test_log_stores_the_dispatch_as_the_registry_does(
    api_root: APIClient, api_namespace: str, redis_client: Any
) -> None:
    response = post_json(api_root, LOG, {"key": "nightly", "fire_time": FIRE, "node_id": "node-a"})
    assert response.status_code == 201
    body = response.json()
    assert body["key"] == "nightly"
    assert body["fire_time"] == FIRE
    assert body["node_id"] == "node-a"
    assert body["status"] == "dispatched"
    assert body["dispatched_at"] > FIRE
    stored = json.loads(redis_client.get(f"{api_namespace}:cron_dispatch:nightly:{FIRE}"))
    assert stored == body


def test_log_defaults_to_this_servers_node_id_and_takes_a_status(
    api_root: APIClient, settings: Any
) -> None:
    body = post_json(api_root, LOG, {"key": "k", "fire_time": FIRE, "status": "failed"}).json()
    assert body["node_id"] == dispatch_node_id()
    assert body["status"] == "failed"
    dispatch = {**settings.LEDGER["DISPATCH"], "NODE_ID": "configured-node"}
    settings.LEDGER = {**settings.LEDGER, "DISPATCH": dispatch}
    again = post_json(api_root, LOG, {"key": "k2", "fire_time": FIRE}).json()
    assert again["node_id"] == "configured-node"


def test_find_and_check(api_root: APIClient) -> None:
    missing = api_root.get(FIND, {"key": "k", "fire_time": FIRE})
    assert missing.status_code == 404
    assert error_code(missing) == "dispatch_not_found"
    assert api_root.get(CHECK, {"key": "k", "fire_time": FIRE}).json() == {"dispatched": False}
    logged = post_json(api_root, LOG, {"key": "k", "fire_time": FIRE, "node_id": "n"}).json()
    found = api_root.get(FIND, {"key": "k", "fire_time": FIRE})
    assert found.status_code == 200
    assert found.json() == logged
    assert api_root.get(CHECK, {"key": "k", "fire_time": FIRE}).json() == {"dispatched": True}
    assert api_root.get(CHECK, {"key": "k", "fire_time": FIRE + 1}).json() == {"dispatched": False}


def test_exactly_one_claim_of_a_fire_wins(api_root: APIClient) -> None:
    won = post_json(api_root, CLAIM, {"key": "k", "fire_time": FIRE, "node_id": "node-a"})
    assert won.status_code == 201
    assert won.json()["won"] is True
    assert won.json()["dispatch"]["node_id"] == "node-a"
    for node in ("node-b", "node-a"):
        lost = post_json(api_root, CLAIM, {"key": "k", "fire_time": FIRE, "node_id": node})
        assert lost.status_code == 409
        assert error_code(lost) == "dispatch_taken"
        assert lost.json()["error"]["details"]["dispatch"]["node_id"] == "node-a"
    other_fire = post_json(
        api_root, CLAIM, {"key": "k", "fire_time": FIRE + 60, "node_id": "node-b"}
    )
    assert other_fire.status_code == 201


def test_a_corrupt_dispatch_record_is_409(
    api_root: APIClient, api_namespace: str, redis_client: Any
) -> None:
    redis_client.set(f"{api_namespace}:cron_dispatch:k:{FIRE}", b"{not json")
    response = api_root.get(FIND, {"key": "k", "fire_time": FIRE})
    assert response.status_code == 409
    assert error_code(response) == "dispatch_corrupt"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"key": "k"},
        {"fire_time": FIRE},
        {"key": "", "fire_time": FIRE},
        {"key": "   ", "fire_time": FIRE},
        {"key": "k", "fire_time": -1},
        {"key": "k", "fire_time": "noon"},
        {"key": "k", "fire_time": 10**12},
        {"key": "k", "fire_time": FIRE, "node_id": "  "},
        {"key": 5, "fire_time": FIRE},
    ],
)
@pytest.mark.parametrize("path", [LOG, CLAIM])
def test_invalid_writes_are_400_and_store_nothing(
    api_root: APIClient, path: str, body: dict[str, Any], api_namespace: str, redis_client: Any
) -> None:
    response = post_json(api_root, path, body)
    assert response.status_code == 400
    assert error_code(response) == "invalid"
    assert redis_client.keys(f"{api_namespace}:*") == []


@pytest.mark.parametrize("path", [FIND, CHECK])
@pytest.mark.parametrize("params", [{}, {"key": "k"}, {"key": "k", "fire_time": "x"}])
def test_invalid_reads_are_400(api_root: APIClient, path: str, params: dict[str, Any]) -> None:
    response = api_root.get(path, params)
    assert response.status_code == 400
    assert error_code(response) == "invalid"
