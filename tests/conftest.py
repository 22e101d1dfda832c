"""Fixtures over the suite's own redis-server (started by ``tests/support/redis_plugin.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from hypothesis import settings

from tests.support.cluster_server import LocalCluster
from tests.support.redis_plugin import session_cluster, session_server
from tests.support.redis_server import RedisServer, delete_namespace

# No test asserts a wall-clock time, Hypothesis's per-example deadline included: on a
# shared 2-CPU machine one example that talks to Redis can take 300 ms now and 15 ms next.
settings.register_profile("ledger", deadline=None)
settings.load_profile("ledger")


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings as django_settings

    # Django's own advice for a test suite: a fast password hasher. Every user made with
    # a password and every sign-in would otherwise run PBKDF2 (a second of CPU each on
    # this machine), and the API's throttle tests sign in dozens of times.
    django_settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def redis_server(pytestconfig: pytest.Config) -> RedisServer:
    """Return the session's redis-server, the one ``REDIS_URL`` and settings point at."""
    return session_server(pytestconfig)


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> Iterator[LocalCluster]:
    """Return a 3-master Redis Cluster: cluster mode's own, else one started for this process."""
    own = session_cluster(pytestconfig)
    if own is not None:
        yield own
        return
    with LocalCluster(3) as started:
        yield started


@pytest.fixture
def redis_client(pytestconfig: pytest.Config, redis_server: RedisServer) -> Iterator[redis.Redis]:
    """Return a client that answers bytes: on the session's server, or cluster mode's cluster."""
    own = session_cluster(pytestconfig)
    client = redis_server.client(decode_responses=False) if own is None else own.client()
    yield client
    client.close()


@pytest.fixture
def namespace(pytestconfig: pytest.Config, redis_server: RedisServer) -> Iterator[str]:
    """Return a namespace no other test uses, and delete its keys afterwards."""
    name = f"t{uuid.uuid4().hex[:16]}"
    yield name
    own = session_cluster(pytestconfig)
    clients = [redis_server.client()] + ([] if own is None else [own.client()])
    try:
        for client in clients:
            delete_namespace(client, name)
    finally:
        for client in clients:
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
