"""The suite's own Redis: where it runs, how it dies and comes back, what it cleans."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

from tests.support.redis_server import (
    FORBIDDEN_PORT,
    RedisServer,
    RedisServerError,
    delete_namespace,
)


@pytest.mark.standalone_only(reason="the settings point at the cluster instead")
def test_session_server_is_ours_and_settings_point_at_it(
    redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    assert redis_server.port != FORBIDDEN_PORT
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert os.environ["REDIS_URL"] == redis_server.url
    # Settings were imported after the server started, so they never saw 6379.
    assert settings.LEDGER["CONNECTION"] == redis_server.url
    assert settings.CACHES["default"]["LOCATION"] == redis_server.url
    assert redis_client.info("server")["process_id"] == redis_server.pid
    assert redis_client.config_get("save") in ({"save": ""}, {b"save": b""})  # no RDB


def test_the_machine_port_is_refused() -> None:
    with pytest.raises(ValueError, match="6379"):
        RedisServer(port=FORBIDDEN_PORT)


def test_kill_drops_connections(fresh_redis: RedisServer) -> None:
    client = fresh_redis.client()
    assert client.ping()
    fresh_redis.kill()
    assert not fresh_redis.running
    with pytest.raises(redis.ConnectionError):
        client.ping()


def test_restart_after_kill_replays_the_aof(fresh_redis: RedisServer) -> None:
    port = fresh_redis.port
    client = fresh_redis.client()
    client.set("kept", "yes")  # appendfsync always: on disk before the reply
    fresh_redis.kill()
    fresh_redis.restart()
    assert fresh_redis.port == port
    assert client.get("kept") == b"yes"  # the same client reconnects to the same URL


def test_graceful_restart_keeps_data(fresh_redis: RedisServer) -> None:
    client = fresh_redis.client()
    client.set("kept", "yes")
    fresh_redis.restart()
    assert client.get("kept") == b"yes"


def test_without_aof_a_restart_starts_empty() -> None:
    with RedisServer() as server:
        server.client().set("lost", "yes")
        server.kill()
        server.restart()
        assert server.client().get("lost") is None


def test_context_manager_stops_and_removes_its_directory() -> None:
    with RedisServer() as server:
        directory = server.dir
        assert directory.is_dir()
        assert server.client().ping()
    assert not server.running
    assert not directory.exists()


def test_a_taken_port_is_an_error_not_someone_elses_server(redis_server: RedisServer) -> None:
    intruder = RedisServer(port=redis_server.port)
    try:
        with pytest.raises(RedisServerError, match="taken"):
            intruder.start()
    finally:
        intruder.cleanup()


def test_a_failed_start_shows_the_log() -> None:
    server = RedisServer(extra_args=["--no-such-directive", "1"])
    try:
        with pytest.raises(RedisServerError, match="no-such-directive"):
            server.start()
    finally:
        server.cleanup()


def test_delete_namespace_deletes_only_that_namespace(redis_client: redis.Redis) -> None:
    redis_client.set("{tmine:default}:records", 1)
    redis_client.set("tmine:cron_dispatch:job:1", 1)
    redis_client.set("{tmine2:default}:records", 1)
    redis_client.set("tminex", 1)
    try:
        assert delete_namespace(redis_client, "tmine") == 2
        assert redis_client.exists("{tmine2:default}:records", "tminex") == 2
    finally:
        redis_client.delete("{tmine2:default}:records", "tminex")


@pytest.fixture
def keys_left_behind(redis_server: RedisServer) -> Iterator[list[str]]:
    # Requested before `namespace`, so it tears down after it: it sees what is left.
    names: list[str] = []
    yield names
    client = redis_server.client()
    for name in names:
        assert list(client.scan_iter(match=f"*{name}*")) == []
    client.close()


@pytest.mark.standalone_only(reason="checks the cleanup on the standalone server")
def test_namespace_fixture_cleans_up(
    keys_left_behind: list[str], namespace: str, redis_client: redis.Redis
) -> None:
    keys_left_behind.append(namespace)
    redis_client.set(f"{{{namespace}:default}}:records", 1)
    redis_client.set(f"{namespace}:cron_dispatch:job:1", 1)
    assert len(list(redis_client.scan_iter(match=f"*{namespace}*"))) == 2
