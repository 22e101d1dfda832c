"""A queue's demand, for an autoscaler: due now plus running, from the API and the command.

KEDA's ``metrics-api`` scaler reads one JSON value at a path (``valueLocation: demand``)
from ``GET /api/queues/{queue}/stats/`` with a user's API token; ``manage.py ledger_status
--demand QUEUE`` prints the same number. Neither needs a worker to run.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from rest_framework.test import APIClient

from django_ledger import Ledger, State
from django_ledger.conf import get_ledger
from django_ledger.core.sharded import ShardedLedger
from tests.cluster.test_sharded_faces import SHARDS, sharded_settings
from tests.support.api_helpers import error_code, url
from tests.support.worker_process import wait_until

pytest_plugins = ["tests.support.api_fixtures"]

STATS = url("default", "stats/")


def demand_command(queue: str = "default") -> str:
    out = io.StringIO()
    call_command("ledger_status", "--demand", queue, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def value_at(body: dict[str, Any], location: str) -> Any:
    """What KEDA reads at a GJSON path of plain keys (``valueLocation``)."""
    value: Any = body
    for key in location.split("."):
        value = value[key]
    return value


def test_demand_is_due_now_plus_running_and_the_command_prints_it(
    api_client_for: Callable[..., APIClient], api_ledger: Ledger
) -> None:
    autoscaler = api_client_for("view_queue")
    assert autoscaler.get(STATS).json()["demand"] == 0
    assert demand_command() == "0\n"
    api_ledger.admit_many([(f"r{i}", "p") for i in range(6)])
    api_ledger.admit("later", "p", delay=3600)  # due in an hour: no worker needed yet
    claims = api_ledger.claim_many("w", 3)
    api_ledger.settle(claims[0])
    api_ledger.settle(claims[1], State.FAILED)
    # Due: 3; running: 1 (still claimed); ended: 2; later: 1.
    response = autoscaler.get(STATS)
    assert response.status_code == 200
    body = response.json()
    assert value_at(body, "demand") == 4 == body["pending_due"] + body["claimed"]
    assert demand_command() == "4\n"
    # The last running task keeps the demand above zero until it settles.
    for claim in api_ledger.claim_many("w", 10):
        api_ledger.settle(claim)
    assert autoscaler.get(STATS).json()["demand"] == 1
    api_ledger.settle(claims[2])
    assert autoscaler.get(STATS).json()["demand"] == 0
    assert demand_command() == "0\n"


def test_an_expired_lease_counts_before_and_after_repair_returns_it(
    api_client_for: Callable[..., APIClient], api_ledger: Ledger
) -> None:
    autoscaler = api_client_for("view_queue")
    api_ledger.admit("r", "p")
    assert api_ledger.claim("w", lease=0.001) is not None
    wait_until(lambda: api_ledger.stats().expired_leases == 1, what="the lease to expire")
    body = autoscaler.get(STATS).json()
    assert (body["claimed"], body["expired_leases"], body["demand"]) == (1, 1, 1)
    assert api_ledger.repair() == "0"
    body = autoscaler.get(STATS).json()
    assert (body["pending_due"], body["claimed"], body["demand"]) == (1, 0, 1)


def test_demand_needs_a_token_holding_view_queue(
    api_client_for: Callable[..., APIClient], api_anonymous: APIClient
) -> None:
    assert api_anonymous.get(STATS).status_code == 401
    api_anonymous.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert api_anonymous.get(STATS).status_code == 401
    response = api_client_for("view").get(STATS)
    assert response.status_code == 403
    assert error_code(response) == "permission_denied"
    # A queue the caller may not reach answers 404, naming no queue.
    assert api_client_for("view_queue").get(url("nope", "stats/")).status_code == 404


@pytest.fixture
def sharded(namespace: str) -> Iterator[ShardedLedger]:
    with override_settings(LEDGER=sharded_settings(namespace)):
        ledger = get_ledger("default")
        assert isinstance(ledger, ShardedLedger) and len(ledger.shards) == SHARDS
        yield ledger


@pytest.mark.django_db
def test_a_sharded_queue_sums_every_shard(
    sharded: ShardedLedger, api_client_for: Callable[..., APIClient]
) -> None:
    sharded.admit_many([(f"id-{i}", "p") for i in range(30)])
    assert all(shard.stats().pending_due for shard in sharded.shards)  # spread on each
    sharded.claim_many("w", 5)
    with override_settings(LEDGER=sharded_settings(sharded.namespace)):
        assert api_client_for("view_queue").get(STATS).json()["demand"] == 30
        assert demand_command() == "30\n"


def test_the_command_refuses_an_unknown_queue(api_namespace: str) -> None:
    with pytest.raises(CommandError, match="unknown ledger queue 'nope'"):
        demand_command("nope")


def test_the_command_says_when_redis_is_away(namespace: str) -> None:
    config = {"CONNECTION": "redis://127.0.0.1:1/0", "NAMESPACE": namespace}
    with override_settings(LEDGER=config), pytest.raises(CommandError, match="default"):
        demand_command()
