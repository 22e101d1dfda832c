"""API dispatch registry: log, find, check and claim cron fires."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_ledger.conf import dispatch_node_id
from tests.support.api_helpers import error_code, post_json

pytest_plugins = ["tests.support.api_fixtures"]

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


# -- dispatch keys belong to groups, as queues do ---------------------------------------


@pytest.fixture
def tenants(settings: Any, api_namespace: str) -> None:
    """Two teams, each with its queue and its dispatch keys."""
    settings.LEDGER = {
        **settings.LEDGER,
        "QUEUES": {
            "default": {},
            "emails": {"GROUPS": ["emails-team"]},
            "reports": {"GROUPS": ["reports-team"]},
        },
        "DISPATCH": {
            **settings.LEDGER["DISPATCH"],
            "GROUPS": {
                "emails:": ["emails-team"],
                "emails:vip:": ["vip-team"],
                "reports:": ["reports-team"],
                "shared:": [],
            },
        },
    }


def stored(redis_client: Any, namespace: str) -> list[bytes]:
    return list(redis_client.keys(f"{namespace}:cron_dispatch:*"))


def every_call(client: APIClient, key: str) -> list[Any]:
    """Log, claim, find and check one fire of ``key``."""
    fire = {"key": key, "fire_time": FIRE}
    return [
        post_json(client, LOG, {**fire, "node_id": "intruder"}),
        post_json(client, CLAIM, {**fire, "node_id": "intruder"}),
        client.get(FIND, fire),
        client.get(CHECK, fire),
    ]


def test_a_team_cannot_overwrite_or_pre_claim_another_teams_fire(
    api_client_for: Callable[..., APIClient],
    tenants: None,
    api_namespace: str,
    redis_client: Any,
) -> None:
    emails = api_client_for("claim", "view", groups=("emails-team",))
    reports = api_client_for("claim", "view", groups=("reports-team",))
    for response in every_call(emails, "reports:nightly"):
        assert response.status_code == 403, response.content
        assert error_code(response) == "dispatch_key_forbidden"
        assert response.json()["error"]["details"] == {"key": "reports:nightly"}
    assert stored(redis_client, api_namespace) == []
    # So the owner's scheduled fire is not skipped: its claim wins.
    won = post_json(reports, CLAIM, {"key": "reports:nightly", "fire_time": FIRE, "node_id": "r"})
    assert won.status_code == 201
    assert reports.get(FIND, {"key": "reports:nightly", "fire_time": FIRE}).status_code == 200


def test_a_team_uses_its_own_keys(api_client_for: Callable[..., APIClient], tenants: None) -> None:
    emails = api_client_for("claim", "view", groups=("emails-team",))
    log, claim, find, check = every_call(emails, "emails:digest")
    assert log.status_code == 201
    assert claim.status_code == 409  # the log above took the fire
    assert error_code(claim) == "dispatch_taken"
    assert find.status_code == 200 and find.json()["node_id"] == "intruder"
    assert check.json() == {"dispatched": True}


def test_the_longest_prefix_decides(
    api_client_for: Callable[..., APIClient], tenants: None
) -> None:
    emails = api_client_for("claim", groups=("emails-team",))
    vip = api_client_for("claim", groups=("vip-team",))
    body = {"key": "emails:vip:welcome", "fire_time": FIRE}
    assert error_code(post_json(emails, CLAIM, body)) == "dispatch_key_forbidden"
    assert post_json(vip, CLAIM, body).status_code == 201
    assert error_code(post_json(vip, CLAIM, {**body, "key": "emails:other"})) == (
        "dispatch_key_forbidden"
    )


def test_an_empty_group_list_opens_a_prefix(
    api_client_for: Callable[..., APIClient], tenants: None
) -> None:
    for groups in (("emails-team",), ("reports-team",), ()):
        client = api_client_for("claim", groups=groups)
        response = post_json(client, LOG, {"key": "shared:heartbeat", "fire_time": FIRE})
        assert response.status_code == 201, (groups, response.content)


def test_a_key_no_prefix_starts_is_for_users_who_reach_every_queue(
    api_client_for: Callable[..., APIClient], api_root: APIClient, tenants: None
) -> None:
    body = {"key": "nightly", "fire_time": FIRE}
    for groups in (("emails-team",), ("reports-team",), ()):
        client = api_client_for("claim", groups=groups)
        response = post_json(client, CLAIM, body)
        assert response.status_code == 403, groups
        assert error_code(response) == "dispatch_key_forbidden"
    both = api_client_for("claim", groups=("emails-team", "reports-team"))
    assert post_json(both, CLAIM, body).status_code == 201
    assert post_json(api_root, CLAIM, {**body, "fire_time": FIRE + 60}).status_code == 201
    assert post_json(api_root, LOG, {"key": "reports:nightly", "fire_time": FIRE}).status_code == (
        201
    )


def test_with_queue_groups_and_no_dispatch_groups_every_key_is_closed_to_a_team(
    api_client_for: Callable[..., APIClient], settings: Any, api_namespace: str
) -> None:
    queues = {"default": {}, "emails": {"GROUPS": ["emails-team"]}}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues}
    outsider = api_client_for("claim", "view")
    response = post_json(outsider, CLAIM, {"key": "emails:digest", "fire_time": FIRE})
    assert error_code(response) == "dispatch_key_forbidden"
    assert error_code(outsider.get(CHECK, {"key": "x", "fire_time": FIRE})) == (
        "dispatch_key_forbidden"
    )
    member = api_client_for("claim", groups=("emails-team",))
    assert post_json(member, CLAIM, {"key": "emails:digest", "fire_time": FIRE}).status_code == 201


def test_without_any_groups_every_permitted_user_reaches_every_key(
    api_client_for: Callable[..., APIClient],
) -> None:
    client = api_client_for("claim", "view")
    for key in ("nightly", "emails:digest", "reports:weekly"):
        assert post_json(client, CLAIM, {"key": key, "fire_time": FIRE}).status_code == 201
        assert client.get(CHECK, {"key": key, "fire_time": FIRE}).json() == {"dispatched": True}


def test_the_permission_is_checked_before_the_key(
    api_client_for: Callable[..., APIClient], tenants: None
) -> None:
    viewer = api_client_for("view", groups=("emails-team",))
    response = post_json(viewer, CLAIM, {"key": "reports:nightly", "fire_time": FIRE})
    assert response.status_code == 403
    assert error_code(response) == "permission_denied"
    # An invalid body is refused as such, whatever key it names.
    member = api_client_for("claim", groups=("emails-team",))
    invalid = post_json(member, CLAIM, {"key": "reports:nightly", "fire_time": -1})
    assert error_code(invalid) == "invalid"
