"""Fixtures over the suite's own redis-server (started by ``tests/redis_plugin.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from tests.redis_plugin import session_server
from tests.redis_server import RedisServer, delete_namespace


@pytest.fixture(scope="session")
def redis_server(pytestconfig: pytest.Config) -> RedisServer:
    """Return the session's redis-server, the one ``REDIS_URL`` and settings point at."""
    return session_server(pytestconfig)


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """Return a client on the session's server that answers bytes."""
    client = redis_server.client(decode_responses=False)
    yield client
    client.close()


@pytest.fixture
def namespace(redis_server: RedisServer) -> Iterator[str]:
    """Return a namespace no other test uses, and delete its keys afterwards."""
    name = f"t{uuid.uuid4().hex[:16]}"
    yield name
    client = redis_server.client()
    try:
        delete_namespace(client, name)
    finally:
        client.close()


@pytest.fixture
def fresh_redis() -> Iterator[RedisServer]:
    """Return a redis-server of the test's own (AOF on), to kill and restart at will."""
    server = RedisServer(appendonly=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        server.cleanup()
