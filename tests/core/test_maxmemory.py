"""A Redis that refuses writes (``maxmemory`` reached, ``noeviction``): LedgerError, nothing lost.

This is the Redis ``check --deploy`` asks for: under memory pressure it refuses writes
instead of evicting records. Every test fills a private server for real (``CONFIG SET
maxmemory`` below what it already uses) and checks what each face of the ledger
answers: the core raises ``LedgerError`` (Redis refused, not ``LedgerUnavailable``)
and writes nothing, reads go on, and once there is room again everything works.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from django_ledger import (
    AdmissionStatus,
    LedgerError,
    LedgerUnavailable,
    SettlementStatus,
    State,
)
from django_ledger.conf import get_ledger, reset_connections
from tests.support.admin_fixtures import admin_user  # noqa: F401 - the fixture
from tests.support.api_helpers import error_code, url
from tests.support.ledger_helpers import dump, make_ledger
from tests.support.redis_server import RedisServer

pytest_plugins = ["tests.support.ledger_fixtures", "tests.support.api_fixtures"]


@contextmanager
def full(server: RedisServer) -> Iterator[None]:
    """Make ``server`` refuse every write, as a Redis at its ``maxmemory`` does."""
    with server.client() as client:
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", 1)  # far below what it uses already
        try:
            yield
        finally:
            client.config_set("maxmemory", 0)  # no limit: room again


def refused(error: pytest.ExceptionInfo[LedgerError]) -> None:
    """Check a refusal: a LedgerError that is not LedgerUnavailable, caused by OOM."""
    assert not isinstance(error.value, LedgerUnavailable)
    cause = error.value.__cause__
    assert isinstance(cause, redis.ResponseError), repr(cause)
    assert isinstance(cause, redis.exceptions.OutOfMemoryError), repr(cause)
    assert "maxmemory" in str(cause)


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


@pytest.fixture
def client(fresh_redis: RedisServer) -> Iterator[redis.Redis]:
    with fresh_redis.client() as client:
        yield client


# -- the core --------------------------------------------------------------------------


def test_every_write_raises_ledger_error_and_changes_nothing(
    fresh_redis: RedisServer, client: redis.Redis, namespace: str, optimized: bool
) -> None:
    ledger = make_ledger(client, namespace, optimized)
    ledger.admit("held", "payload")
    held = ledger.claim("worker", lease=600)
    assert held is not None and held.request_id == "held"
    ledger.admit("kept", "payload")
    before = dump(ledger)
    writes = {
        "admit": lambda: ledger.admit("new", "payload"),
        "admit_many": lambda: ledger.admit_many([("new", "payload"), ("newer", "payload")]),
        "claim": lambda: ledger.claim("worker", lease=600),
        "renew": lambda: ledger.renew(held, lease=900),
        "settle": lambda: ledger.settle(held, State.COMPLETED),
        "close_gate": ledger.close_gate,
    }
    with full(fresh_redis):
        for name, write in writes.items():
            with pytest.raises(LedgerError) as caught:
                write()
            refused(caught)
            after = dump(ledger)
            if name == "claim" and not optimized:
                taken = after
                # The reference claim takes the wake marker before it reads the index
                # (as a woken worker's BZPOPMIN does), so that no admission's wake-up is
                # lost between its calls: deleting a key needs no memory. Nothing else moves.
                after = {k: v for k, v in after.items() if not k.endswith(":wake")}
                before_claim = {k: v for k, v in before.items() if not k.endswith(":wake")}
                assert after == before_claim, f"a refused {name} wrote to Redis"
                before = taken
                continue
            assert after == before, f"a refused {name} wrote to Redis"
        # Reads need no memory: they go on.
        record = ledger.resolve("kept")
        assert record is not None and record.state is State.PENDING
        stats = ledger.stats()
        assert (stats.pending_due, stats.claimed, stats.total) == (1, 1, 2)
    # Room again: the same ledger object writes, and the claim it held still holds.
    assert ledger.admit("new", "payload").status is AdmissionStatus.ADMITTED
    assert ledger.settle(held, State.COMPLETED).status is SettlementStatus.SETTLED


# -- the API ---------------------------------------------------------------------------


def test_the_api_answers_507_without_redis_internals(
    fresh_redis: RedisServer, api_root: APIClient, settings: Any
) -> None:
    settings.LEDGER = {**settings.LEDGER, "CONNECTION": fresh_redis.url}
    with full(fresh_redis):
        response = api_root.post(
            url("default", "admit/"), {"request_id": "r1", "payload": "p"}, format="json"
        )
    assert response.status_code == 507
    assert error_code(response) == "ledger_out_of_memory"
    assert response["Retry-After"] == "5"
    text = response.content.decode()
    for internal in ("maxmemory", "script", "sha", "@user_script", "OOM"):
        assert internal not in text, text
    assert get_ledger().resolve("r1") is None
    again = api_root.post(
        url("default", "admit/"), {"request_id": "r1", "payload": "p"}, format="json"
    )
    assert again.status_code == 201


@pytest.mark.django_db
def test_the_token_endpoint_answers_json_when_its_cache_is_full(
    fresh_redis: RedisServer, settings: Any, django_user_model: Any
) -> None:
    # The throttle counts in the default cache: here a django-redis cache on that Redis.
    settings.CACHES = {
        "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": fresh_redis.url}
    }
    django_user_model.objects.create_user("worker-7", None, "pw")
    with full(fresh_redis):
        response = APIClient().post(
            "/api/token/", {"username": "worker-7", "password": "pw"}, format="json"
        )
    assert response.status_code == 507, response.content[:300]
    assert error_code(response) == "ledger_out_of_memory"
    assert "maxmemory" not in response.content.decode()


# -- the admin -------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_admin_action_is_refused_with_the_reason(
    fresh_redis: RedisServer, admin_client: Client, namespace: str, settings: Any
) -> None:
    settings.LEDGER = {**settings.LEDGER, "CONNECTION": fresh_redis.url, "NAMESPACE": namespace}
    ledger = get_ledger()
    ledger.admit("job", "payload", delay=3600)
    detail = reverse("admin:django_ledger_record_change", args=("default job",))
    page = admin_client.get(detail).content.decode()
    link = re.search(r'href="([^"]*)" data-action="retry"', page)
    assert link is not None
    form = admin_client.get(link.group(1).replace("&amp;", "&")).content.decode()
    items = re.findall(r'name="item" value="([^"]*)"', form)
    assert len(items) == 1
    act = reverse("admin:django_ledger_record_act", args=("retry",))
    with full(fresh_redis):
        response = admin_client.post(act, {"item": items, "next": detail}, follow=True)
    notes = [str(message) for message in get_messages(response.wsgi_request)]
    assert any(
        note.startswith("Retry now: 'job' refused:") and "maxmemory" in note for note in notes
    ), notes
    record = ledger.resolve("job")
    assert record is not None and record.due_at > ledger.server_time_ms()  # not retried


# -- the commands ----------------------------------------------------------------------


def command_settings(server: RedisServer, namespace: str) -> Any:
    return override_settings(
        LEDGER={"CONNECTION": server.url, "NAMESPACE": namespace, "QUEUES": {"default": {}}}
    )


def test_import_into_a_full_redis_is_a_command_error(
    fresh_redis: RedisServer, namespace: str, tmp_path: Path
) -> None:
    path = tmp_path / "records.jsonl"
    line = {"request_id": "r1", "payload": "p", "state": "PENDING", "due_at": 0}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    with command_settings(fresh_redis, namespace):
        with full(fresh_redis), pytest.raises(CommandError, match="maxmemory"):
            call_command("ledger_import", str(path), stdout=io.StringIO(), stderr=io.StringIO())
        assert get_ledger().resolve("r1") is None
        out = io.StringIO()
        call_command("ledger_import", str(path), stdout=out, stderr=io.StringIO())
        assert "1 imported" in out.getvalue()
        assert get_ledger().resolve("r1") is not None
