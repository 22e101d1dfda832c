"""API authentication, permissions per action, queue reach and throttling, for every route."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from django_ledger import Ledger
from tests.support.api_helpers import error_code, token_client

pytest_plugins = ["tests.support.api_fixtures"]


def fresh_cache() -> dict[str, Any]:
    """CACHES with a local-memory cache of its own: no throttle count of another test."""
    location = f"throttles-{uuid.uuid4().hex}"
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": location,
        }
    }


@dataclass(frozen=True)
class Route:
    """One endpoint, a call that a permitted user may make, and the action it needs."""

    name: str
    method: str
    path: str
    action: str | None
    body: dict[str, Any] = field(default_factory=dict)
    query: dict[str, Any] = field(default_factory=dict)
    #: What the call's body asks for beyond the route's own action (a bulk run's action).
    also: tuple[str, ...] = ()

    def call(self, client: APIClient, queue: str = "default") -> Any:
        path = self.path.format(queue=queue)
        if self.method == "GET":
            return client.get(path, self.query)
        return client.post(path, self.body, format="json")


Q = "/api/queues/{queue}/"
ROUTES = [
    Route("queues", "GET", "/api/queues/", None),
    Route("admit", "POST", Q + "admit/", "admit", {"request_id": "r1", "payload": "p"}),
    Route(
        "admit-batch",
        "POST",
        Q + "admit/batch/",
        "admit",
        {"items": [{"request_id": "r2", "payload": "p"}]},
    ),
    Route("claim", "POST", Q + "claims/", "claim", {"owner": "w"}),
    Route("renew", "POST", Q + "claims/renew/", "claim", {"token": "t"}),
    Route("renew-batch", "POST", Q + "claims/renew/batch/", "claim", {"items": [{"token": "t"}]}),
    Route("settle", "POST", Q + "claims/settle/", "claim", {"token": "t"}),
    Route("settle-batch", "POST", Q + "claims/settle/batch/", "claim", {"items": [{"token": "t"}]}),
    Route("records", "GET", Q + "records/", "view"),
    Route("record", "GET", Q + "records/r1", "view"),
    Route("resolve", "GET", Q + "resolve/", "view", query={"ids": ["r1"]}),
    Route("task-result", "GET", Q + "results/r1", "view"),
    Route("stats", "GET", Q + "stats/", "view_queue"),
    Route("series", "GET", Q + "series/", "view_queue"),
    Route("quarantine", "GET", Q + "quarantine/", "view_quarantine"),
    Route("repair", "POST", Q + "repair/", "operate", {"cursor": "0"}),
    Route("gate", "POST", Q + "gate/", "operate", {"closed": True}),
    Route("record-cancel", "POST", Q + "records/r1/cancel/", "operate", {}),
    # The route needs view; the run's action (here retry) needs its own permission too.
    Route(
        "records-bulk",
        "POST",
        Q + "records/bulk/",
        "view",
        {"action": "retry", "preview": True},
        also=("retry",),
    ),
    Route("limits", "GET", Q + "limits/", "view_queue"),
    Route("limits-change", "POST", Q + "limits/change/", "limit", {"concurrency": 2}),
    Route("workflow", "GET", Q + "workflows/w1/", "view"),
    Route("dispatch-log", "POST", "/api/dispatch/log/", "claim", {"key": "k", "fire_time": 1}),
    Route(
        "dispatch-find", "GET", "/api/dispatch/find/", "view", query={"key": "k", "fire_time": 1}
    ),
    Route(
        "dispatch-check", "GET", "/api/dispatch/check/", "view", query={"key": "k", "fire_time": 1}
    ),
    Route("dispatch-claim", "POST", "/api/dispatch/claim/", "claim", {"key": "k", "fire_time": 2}),
    Route("schedules", "GET", "/api/schedules/", "view_schedule"),
    Route("schedule", "GET", "/api/schedules/nightly/", "view_schedule"),
    Route("schedule-pause", "POST", "/api/schedules/nightly/pause/", "operate_schedule", {}),
    Route("schedule-resume", "POST", "/api/schedules/nightly/resume/", "operate_schedule", {}),
]
QUEUE_ROUTES = [route for route in ROUTES if "{queue}" in route.path]
GUARDED = [route for route in ROUTES if route.action is not None]
ALL_ACTIONS = (
    "admit",
    "claim",
    "view",
    "view_queue",
    "view_quarantine",
    "operate",
    "limit",
    "retry",
)


def by_name(routes: list[Route]) -> Any:
    return pytest.mark.parametrize("route", routes, ids=[route.name for route in routes])


def test_the_route_list_covers_every_api_url() -> None:
    from django_ledger.api.urls import urlpatterns

    # The schema and docs are tested in test_api_docs.py; the token endpoint, open to
    # anyone, in test_api_token.py.
    names = {pattern.name for pattern in urlpatterns} - {"schema", "docs", "token"}
    assert names == {route.name for route in ROUTES}


def got_through(response: Any) -> bool:
    """Whether a call passed authentication, permission and queue reach (and no 5xx)."""
    if response.status_code in (401, 403) or response.status_code >= 500:
        return False
    return response.status_code != 404 or error_code(response) != "queue_not_found"


def nothing_written(redis_client: Any, namespace: str) -> bool:
    return not redis_client.keys(f"*{namespace}*")


@by_name(ROUTES)
def test_an_anonymous_call_is_401_and_writes_nothing(
    api_anonymous: APIClient, route: Route, redis_client: Any, api_namespace: str
) -> None:
    response = route.call(api_anonymous)
    assert response.status_code == 401
    assert error_code(response) == "not_authenticated"
    assert response["WWW-Authenticate"] == "Token"
    assert nothing_written(redis_client, api_namespace)


@by_name(ROUTES)
def test_a_bad_token_is_401(api_anonymous: APIClient, route: Route) -> None:
    api_anonymous.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = route.call(api_anonymous)
    assert response.status_code == 401
    assert error_code(response) == "authentication_failed"


@by_name(ROUTES)
def test_an_inactive_users_token_is_401(api_make_user: Callable[..., User], route: Route) -> None:
    user = api_make_user(*ALL_ACTIONS)
    client = token_client(user)
    user.is_active = False
    user.save()
    assert route.call(client).status_code == 401


@by_name(GUARDED)
def test_a_user_without_the_actions_permission_is_403_and_writes_nothing(
    api_client_for: Callable[..., APIClient], route: Route, redis_client: Any, api_namespace: str
) -> None:
    others = [action for action in ALL_ACTIONS if action != route.action]
    response = route.call(api_client_for(*others))
    assert response.status_code == 403
    assert error_code(response) == "permission_denied"
    assert response.json()["error"]["details"] == {"action": route.action}
    assert nothing_written(redis_client, api_namespace)


@by_name(ROUTES)
def test_a_user_with_just_the_actions_permission_gets_through(
    api_client_for: Callable[..., APIClient], route: Route
) -> None:
    actions = () if route.action is None else (route.action, *route.also)
    response = route.call(api_client_for(*actions))
    assert got_through(response), response.content


@by_name(ROUTES)
def test_a_superuser_gets_through(api_root: APIClient, route: Route) -> None:
    response = route.call(api_root)
    assert got_through(response), response.content


@by_name(QUEUE_ROUTES)
def test_an_unknown_queue_is_404_only_for_a_permitted_user(
    api_client_for: Callable[..., APIClient], route: Route
) -> None:
    permitted = route.call(api_client_for(*ALL_ACTIONS), queue="unknown")
    assert permitted.status_code == 404
    assert error_code(permitted) == "queue_not_found"
    # Without the permission nothing is said about which queues exist.
    assert route.call(api_client_for(), queue="unknown").status_code == 403


@by_name(QUEUE_ROUTES)
def test_a_queue_limited_to_groups_is_404_outside_them(
    api_client_for: Callable[..., APIClient], route: Route, settings: Any
) -> None:
    queues = {**settings.LEDGER["QUEUES"], "default": {"GROUPS": ["ops"]}}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues}
    outsider = route.call(api_client_for(*ALL_ACTIONS))
    assert outsider.status_code == 404
    assert error_code(outsider) == "queue_not_found"
    member = route.call(api_client_for(*ALL_ACTIONS, groups=("ops",)))
    assert got_through(member), member.content


def test_the_queue_list_names_reachable_queues_and_the_actions_held(
    api_client_for: Callable[..., APIClient], settings: Any
) -> None:
    queues = {**settings.LEDGER["QUEUES"], "reports": {"GROUPS": ["ops"]}}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues}
    body = api_client_for("admit", "view").get("/api/queues/").json()
    names = [queue["name"] for queue in body["queues"]]
    assert "reports" not in names
    assert "default" in names
    assert {queue["name"]: queue["actions"] for queue in body["queues"]}["default"] == [
        "admit",
        "view",
    ]
    assert api_client_for().get("/api/queues/").json() == {"queues": []}


def test_session_authentication_works_and_checks_csrf(
    api_make_user: Callable[..., User], api_ledger: Ledger
) -> None:
    user = api_make_user("admit", "view_queue")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/api/queues/default/stats/").status_code == 200
    body = {"request_id": "r1", "payload": "p"}
    refused = client.post("/api/queues/default/admit/", body, format="json")
    assert refused.status_code == 403
    assert error_code(refused) == "permission_denied"
    assert "CSRF" in refused.json()["error"]["message"]
    assert api_ledger.stats().total == 0
    relaxed = APIClient()
    relaxed.force_login(user)
    assert relaxed.post("/api/queues/default/admit/", body, format="json").status_code == 201


def test_throttles_are_per_scope_and_answer_429_with_retry_after(
    api_root: APIClient, api_ledger: Ledger, settings: Any
) -> None:
    settings.CACHES = fresh_cache()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"ledger.admit": "2/min", "ledger.read": "100/min"},
    }
    for i in range(2):
        body = {"request_id": f"r{i}", "payload": "p"}
        assert api_root.post("/api/queues/default/admit/", body, format="json").status_code == 201
    response = api_root.post(
        "/api/queues/default/admit/", {"request_id": "r9", "payload": "p"}, format="json"
    )
    assert response.status_code == 429
    assert error_code(response) == "throttled"
    assert int(response["Retry-After"]) > 0
    assert response.json()["error"]["details"]["wait"] > 0
    assert api_ledger.stats().total == 2
    # Other scopes keep their own counts (or have none).
    assert api_root.get("/api/queues/default/stats/").status_code == 200
    assert (
        api_root.post("/api/queues/default/claims/", {"owner": "w"}, format="json").status_code
        == 200
    )


def test_the_schema_and_docs_need_a_signed_in_user(
    api_anonymous: APIClient, api_root: APIClient
) -> None:
    assert api_anonymous.get("/api/schema/", {"format": "json"}).status_code == 401
    assert api_anonymous.get("/api/docs/").status_code == 401
    schema = api_root.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    assert "/api/queues/{queue}/admit/" in schema.json()["paths"]
    docs = api_root.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()


@by_name([route for route in QUEUE_ROUTES if route.action is not None])
def test_options_needs_the_actions_permission_and_names_no_queue(
    api_client_for: Callable[..., APIClient], route: Route
) -> None:
    outsider = api_client_for(*[action for action in ALL_ACTIONS if action != route.action])
    for queue in ("default", "unknown"):
        response = outsider.options(route.path.format(queue=queue))
        assert response.status_code == 403, (queue, response.content)
        assert error_code(response) == "permission_denied"
    permitted = api_client_for(route.action)
    assert permitted.options(route.path.format(queue="default")).status_code == 200
    unknown = permitted.options(route.path.format(queue="unknown"))
    assert (unknown.status_code, error_code(unknown)) == (404, "queue_not_found")
