"""Start the suite's redis-server (and, in cluster mode, its cluster) before Django's settings.

``testproject.settings`` reads ``REDIS_URL`` when it is imported, and pytest-django
imports it in its own ``pytest_load_initial_conftests`` hook, before any conftest.py
is even loaded. So this lives in a plugin named with ``-p`` in ``addopts``
(``pythonpath = ["."]`` makes it importable), whose ``tryfirst`` implementation of
that hook runs ahead of pytest-django's. Each pytest-xdist worker is a process of
its own that runs the same hook, so each gets its own server.

Cluster mode (``--redis-cluster``, or ``LEDGER_TEST_CLUSTER=1``; ``tox -e cluster``)
also starts a local Redis Cluster of three masters per process and sets
``REDIS_CLUSTER`` to its nodes: the test project's ``LEDGER['CONNECTION']`` becomes
``{"CLUSTER": [...]}`` and the ``redis_client`` fixture a ``RedisCluster``, while
``REDIS_URL`` (the cache, and tests that name a URL) stays on the standalone server.
Tests marked ``standalone_only`` are skipped there, each with its one-line reason.

``LEDGER_TEST_SHARD=K/N`` runs the K-th of N shares of the collected tests (by a hash of
each test's id, so every xdist worker picks the same share): CI runs the cluster suite
as two halves, one beside each of the other suites.
"""

from __future__ import annotations

import os
import zlib

import pytest

from tests.support.cluster_server import LocalCluster
from tests.support.redis_server import RedisServer, RedisServerError, find_binary

SERVER_KEY = pytest.StashKey[RedisServer]()
CLUSTER_KEY = pytest.StashKey[LocalCluster]()
#: The environment variable that turns cluster mode on (as ``--redis-cluster`` does).
CLUSTER_ENV = "LEDGER_TEST_CLUSTER"
#: ``K/N``: run only the K-th of N shares of the tests.
SHARD_ENV = "LEDGER_TEST_SHARD"
#: Masters of the cluster each test process starts in cluster mode.
CLUSTER_MASTERS = 3


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--redis-cluster",
        action="store_true",
        default=False,
        help=f"run the suite on a local {CLUSTER_MASTERS}-master Redis Cluster per process "
        f"(as {CLUSTER_ENV}=1 does)",
    )


def _cluster_wanted(options: object) -> bool:
    flag = os.environ.get(CLUSTER_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
    return flag or bool(getattr(options, "redis_cluster", False))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    options = early_config.known_args_namespace
    if getattr(options, "help", False) or getattr(options, "version", False):
        return
    server = RedisServer()
    try:
        server.start()
    except RedisServerError as error:
        server.cleanup()
        raise pytest.UsageError(f"cannot start the test Redis: {error}") from error
    early_config.add_cleanup(server.cleanup)
    early_config.stash[SERVER_KEY] = server
    # Overrides any REDIS_URL from the caller's shell: the suite never uses a Redis
    # it did not start.
    os.environ["REDIS_URL"] = server.url
    os.environ.pop("REDIS_CLUSTER", None)
    # An xdist controller runs no test: only its workers need a cluster.
    controller = getattr(options, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ
    if _cluster_wanted(options) and not controller:
        cluster = LocalCluster(CLUSTER_MASTERS)
        try:
            cluster.start()
        except RedisServerError as error:
            raise pytest.UsageError(f"cannot start the test Redis Cluster: {error}") from error
        early_config.add_cleanup(cluster.cleanup)
        early_config.stash[CLUSTER_KEY] = cluster
        os.environ["REDIS_CLUSTER"] = ",".join(cluster.startup_nodes)


def server_name(server: RedisServer) -> str:
    """Say what the server says it is: ``Redis 7.0.15`` or ``Valkey 8.1.8``."""
    with server.client() as client:
        info = client.info("server")
    if "valkey_version" in info:
        return f"Valkey {info['valkey_version']}"
    return f"Redis {info['redis_version']}"


def pytest_report_header(config: pytest.Config) -> list[str]:
    # Which server the suite runs on (tox.ini's envs differ in REDIS_SERVER_BIN alone).
    lines = [f"server: {server_name(session_server(config))} ({find_binary()})"]
    cluster = config.stash.get(CLUSTER_KEY, None)
    if cluster is not None:
        lines.append(f"redis: cluster mode, the ledger on {cluster!r}")
    return lines


def _shard() -> tuple[int, int] | None:
    value = os.environ.get(SHARD_ENV, "").strip()
    if not value:
        return None
    try:
        share, shares = (int(part) for part in value.split("/"))
    except ValueError:
        raise pytest.UsageError(f"{SHARD_ENV}={value!r}: expected K/N, as in 1/2") from None
    if not 1 <= share <= shares:
        raise pytest.UsageError(f"{SHARD_ENV}={value!r}: K must be 1 to N")
    return share, shares


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = _shard()
    if shard is not None:
        share, shares = shard
        kept, left = [], []
        for item in items:
            mine = zlib.crc32(item.nodeid.encode()) % shares == share - 1
            (kept if mine else left).append(item)
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = kept
    if session_cluster(config) is None:
        return
    for item in items:
        marker = item.get_closest_marker("standalone_only")
        if marker is not None:
            reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
            item.add_marker(pytest.mark.skip(reason=f"standalone only: {reason}"))


def session_server(config: pytest.Config) -> RedisServer:
    """Return the server this plugin started for the session."""
    try:
        return config.stash[SERVER_KEY]
    except KeyError:
        raise pytest.UsageError(
            "the test Redis was not started: run pytest from the project root so "
            "that addopts loads '-p tests.support.redis_plugin'"
        ) from None


def session_cluster(config: pytest.Config) -> LocalCluster | None:
    """Return the cluster this plugin started in cluster mode, or ``None``."""
    return config.stash.get(CLUSTER_KEY, None)
