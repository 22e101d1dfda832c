"""A sharded queue (``SHARDS: 3``) through the REST API: one queue, whatever shard holds an id.

The API's listings page every shard by cursor, ties across shards included, list states
and read ids in any shard, and list the quarantine of every shard. In cluster mode the
shards live on different masters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from django_ledger.conf import get_ledger
from django_ledger.core.ledger import Ledger
from django_ledger.core.sharded import ShardedLedger
from tests.cluster.test_sharded_faces import SHARDS, ids_in, quarantine, sharded_settings, spread
from tests.support.api_helpers import token_client, url
from tests.support.ledger_helpers import GARBAGE

pytestmark = pytest.mark.django_db


@pytest.fixture
def sharded(namespace: str) -> Iterator[Ledger]:
    """The ``default`` queue of the test's namespace, in three shards."""
    with override_settings(LEDGER=sharded_settings(namespace)):
        ledger = get_ledger("default")
        assert isinstance(ledger, ShardedLedger) and len(ledger.shards) == SHARDS
        yield ledger


@pytest.fixture
def api_client(sharded: Ledger) -> APIClient:
    user = User.objects.create_superuser("root", "root@example.com", None)
    return token_client(user)


def walk(client: APIClient, **params: Any) -> list[list[str]]:
    """Follow the record listing's cursors to the end; return the ids of every page."""
    pages: list[list[str]] = []
    query = dict(params)
    for _ in range(200):
        response = client.get(url("default", "records/"), query)
        assert response.status_code == 200, response.content
        body = response.json()
        pages.append([r["request_id"] for r in body["results"]])
        if body["next"] is None:
            return pages
        query = {**params, "cursor": body["next"]}
    raise AssertionError("the cursor never ended")


def test_the_api_lists_every_shard_by_cursor(api_client: APIClient, sharded: Ledger) -> None:
    ids = [f"r{i:02d}" for i in range(20)]
    spread(sharded, ids)
    for i, request_id in enumerate(ids):
        sharded.admit(request_id, "p", delay=i)
    pages = walk(api_client, limit=3)
    assert [len(page) for page in pages] == [3] * 6 + [2]
    assert [i for page in pages for i in page] == ids
    newest = walk(api_client, limit=7, order="newest")
    assert [i for page in newest for i in page] == ids[::-1]


def test_the_api_pages_ties_across_shards_without_loss(
    api_client: APIClient, sharded: Ledger
) -> None:
    ids = [f"t{i:02d}" for i in range(15)]
    spread(sharded, ids)
    for shard in sharded.shards:
        shard.admit_many([(i, "p") for i in ids if sharded.shard_for(i) is shard])
    due = {i: r.due_at for i, r in zip(ids, sharded.resolve_many(ids), strict=True)}
    expected = sorted(ids, key=lambda i: (due[i], i))
    assert [i for page in walk(api_client, limit=4) for i in page] == expected
    newest = walk(api_client, limit=4, order="newest")
    assert [i for page in newest for i in page] == expected[::-1]


def test_the_api_lists_states_and_reads_ids_in_any_shard(
    api_client: APIClient, sharded: Ledger, redis_client: redis.Redis
) -> None:
    held = [ids_in(sharded, shard, 1, "held-")[0] for shard in range(SHARDS)]
    sharded.admit_many([(i, "p") for i in held])
    assert len(sharded.claim_many("w", 10, lease=600)) == SHARDS
    claimed = [i for page in walk(api_client, state="CLAIMED", limit=2) for i in page]
    assert sorted(claimed) == sorted(held)

    (one,) = ids_in(sharded, 2, 1, "one-")
    sharded.admit(one, "payload of one")
    response = api_client.get(url("default", f"records/{one}"))
    assert response.status_code == 200
    assert response.json()["payload"] == "payload of one"

    (bad,) = ids_in(sharded, 1, 1, "bad-")
    redis_client.hset(sharded.shard_for(bad).records_key, bad, GARBAGE)
    asked = [held[0], "missing", one, bad, held[2]]
    response = api_client.get(url("default", "resolve/"), {"ids": asked})
    assert response.status_code == 200
    answers = response.json()["results"]
    assert [a["request_id"] for a in answers] == asked
    assert [a["status"] for a in answers] == ["FOUND", "MISSING", "FOUND", "CORRUPT", "FOUND"]
    assert answers[2]["record"]["payload"] == "payload of one"


def test_the_api_quarantine_listing_covers_every_shard(
    api_client: APIClient, sharded: Ledger, redis_client: redis.Redis
) -> None:
    bad = [ids_in(sharded, shard, 1, "bad-")[0] for shard in (0, 2)]
    bad += ids_in(sharded, 2, 2, "bad-")[1:]
    for request_id in bad:
        quarantine(sharded, redis_client, request_id)
    seen: list[str] = []
    query: dict[str, Any] = {"limit": 1}
    for _ in range(20):
        response = api_client.get(url("default", "quarantine/"), query)
        assert response.status_code == 200, response.content
        body = response.json()
        seen += [entry["request_id"] for entry in body["results"]]
        assert all(entry["error"] for entry in body["results"])
        if body["next"] is None:
            break
        query = {"limit": 1, "cursor": body["next"]}
    assert sorted(seen) == sorted(bad)
    forged = api_client.get(url("default", "quarantine/"), {"cursor": "nonsense"})
    assert forged.status_code == 400
