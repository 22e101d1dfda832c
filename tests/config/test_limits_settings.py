"""Flow limits in the settings (RATE, CONCURRENCY), their checks and ``ledger_limits``."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_ledger.checks import check_settings
from django_ledger.conf import get_ledger, ledger_settings, reset_connections
from django_ledger.core.limits import Limits, Rate
from tests.support.redis_server import RedisServer


def config(url: str, namespace: str, **queue: Any) -> dict[str, Any]:
    return {"CONNECTION": url, "NAMESPACE": namespace, "QUEUES": {"default": {}, "api": queue}}


def ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


def test_settings_give_the_limits() -> None:
    queue = {"RATE": {"LIMIT": 50, "PERIOD": 2, "BURST": 10}, "CONCURRENCY": 3}
    with override_settings(LEDGER=config("redis://x", "n", **queue)):
        assert ledger_settings.queue("api").limits == Limits(Rate(50, 2000, 10), 3)
        assert ledger_settings.queue("default").limits == Limits()
        assert check_settings() == []
    with override_settings(LEDGER=config("redis://x", "n", RATE={"LIMIT": 5})):
        assert ledger_settings.queue("api").limits == Limits(Rate(5, 1000, 5))


@pytest.mark.parametrize(
    "queue",
    [
        {"CONCURRENCY": 0},
        {"CONCURRENCY": "3"},
        {"RATE": 50},
        {"RATE": {"PERIOD": 1}},
        {"RATE": {"LIMIT": 5, "EVERY": 1}},
        {"RATE": {"LIMIT": 5, "BURST": 0}},
        {"RATE": {"LIMIT": 5, "PERIOD": 0}},
    ],
)
def test_bad_limits_are_checked_and_refused(queue: dict[str, Any]) -> None:
    with override_settings(LEDGER=config("redis://x", "n", **queue)):
        messages = check_settings()
        assert ids(messages) == ["django_ledger.E100"]
        assert messages[0].hint
        with pytest.raises(ImproperlyConfigured):
            ledger_settings.queue("api")


def test_a_sharded_queue_with_limits_is_refused() -> None:
    with override_settings(LEDGER=config("redis://x", "n", CONCURRENCY=2, SHARDS=2)):
        assert ids(check_settings()) == ["django_ledger.E101"]
        with pytest.raises(ImproperlyConfigured, match="one shard"):
            ledger_settings.queue("api")


def test_get_ledger_writes_the_settings_and_the_command_changes_them(
    redis_server: RedisServer, namespace: str
) -> None:
    settings = config(redis_server.url, namespace, CONCURRENCY=2)
    with override_settings(LEDGER=settings):
        reset_connections()
        try:
            use = get_ledger("api").limits()
            assert use.limits == Limits(None, 2) and use.source == "settings"
            out = io.StringIO()
            call_command(
                "ledger_limits", "api", "--rate", "10/1/4", "--concurrency", "3", stdout=out
            )
            text = out.getvalue()
            assert "rate 10/1s burst 4, concurrency 3" in text
            assert "tokens left: 4 of 4" in text and "slots taken: 0 of 3" in text
            reset_connections()  # a new process: the operator's limits stay
            assert get_ledger("api").limits().limits == Limits(Rate(10, 1000, 4), 3)
            out = io.StringIO()
            call_command("ledger_limits", "api", "--reset", stdout=out)
            assert "queue api: concurrency 2" in out.getvalue()
            call_command("ledger_limits", "api", "--no-concurrency", stdout=io.StringIO())
            assert get_ledger("api").limits().limits == Limits()
            with pytest.raises(CommandError, match="LIMIT/PERIOD"):
                call_command("ledger_limits", "api", "--rate", "fast", stdout=io.StringIO())
            with pytest.raises(CommandError, match="unknown ledger queue"):
                call_command("ledger_limits", "nope", stdout=io.StringIO())
        finally:
            reset_connections()


def test_a_key_parses_or_is_e100() -> None:
    with override_settings(LEDGER=config("redis://x", "n", KEY="kwargs.tenant_id")):
        assert ledger_settings.queue("api").limits == Limits(key="kwargs.tenant_id")
        assert ids(check_settings()) == []
    with override_settings(LEDGER=config("redis://x", "n", KEY="kwargs. tenant")):
        assert ids(check_settings()) == ["django_ledger.E100"]
    with override_settings(LEDGER=config("redis://x", "n", KEY="kwargs.t", SHARDS=2)):
        assert ids(check_settings()) == ["django_ledger.E101"]


def test_get_ledger_admits_with_each_requests_key(
    redis_server: RedisServer, namespace: str
) -> None:
    settings = config(redis_server.url, namespace, CONCURRENCY=1, KEY="kwargs.tenant_id")
    with override_settings(LEDGER=settings):
        reset_connections()
        try:
            ledger = get_ledger("api")
            for i, tenant in enumerate(["a", "a", "b"]):
                ledger.admit(f"r{i}", json.dumps({"args": [], "kwargs": {"tenant_id": tenant}}))
            claims = get_ledger("api").claim_many("w", 10)
            assert sorted(c.request_id for c in claims) == ["r0", "r2"]  # one per tenant
            out = io.StringIO()
            call_command("ledger_limits", "api", "--concurrency", "2", stdout=out)
            assert "per key kwargs.tenant_id" in out.getvalue()
            assert "keys waiting: 1" in out.getvalue() and "'a': due 1" in out.getvalue()
            assert get_ledger("api").limits().limits == Limits(None, 2, "kwargs.tenant_id")
        finally:
            reset_connections()


@pytest.mark.parametrize(
    "args",
    [
        ["--rate", f"{2**63}/1"],
        ["--rate", f"1/1/{2**53 + 1}"],
        ["--rate", "1/" + "9" * 400],
        ["--rate", "1/31622401"],
        ["--concurrency", str(2**63)],
        ["--reset", "--rate", f"{2**63}/1"],
    ],
)
def test_the_command_refuses_a_limit_out_of_bounds_and_writes_nothing(
    redis_server: RedisServer, namespace: str, args: list[str]
) -> None:
    with override_settings(LEDGER=config(redis_server.url, namespace, CONCURRENCY=2)):
        reset_connections()
        try:
            get_ledger("api").set_limits(Limits(Rate(4, 1000, 4), 3), source="operator")
            with pytest.raises(CommandError, match=r"from 1 to|PERIOD"):
                call_command("ledger_limits", "api", *args, stdout=io.StringIO())
            use = get_ledger("api").limits()
            assert use.limits == Limits(Rate(4, 1000, 4), 3) and use.source == "operator"
            out = io.StringIO()
            call_command("ledger_limits", "api", stdout=out)
            assert "rate 4/1s burst 4, concurrency 3" in out.getvalue()
        finally:
            reset_connections()


@pytest.mark.parametrize(
    ("make", "part"),
    [
        (lambda: Rate(2**63, 1000, 1), "limit"),
        (lambda: Rate(1, 1000, 2**53 + 1), "burst"),
        (lambda: Rate(1, 366 * 24 * 3600 * 1000 + 1, 1), "period_ms"),
        (lambda: Limits(concurrency=10**9 + 1), "concurrency"),
    ],
)
def test_the_core_refuses_a_limit_out_of_bounds(make: Any, part: str) -> None:
    with pytest.raises(ValueError, match=part):
        make()
