"""Start the suite's redis-server before Django reads its settings.

``testproject.settings`` reads ``REDIS_URL`` when it is imported, and pytest-django
imports it in its own ``pytest_load_initial_conftests`` hook, before any conftest.py
is even loaded. So this lives in a plugin named with ``-p`` in ``addopts``
(``pythonpath = ["."]`` makes it importable), whose ``tryfirst`` implementation of
that hook runs ahead of pytest-django's. Each pytest-xdist worker is a process of
its own that runs the same hook, so each gets its own server.
"""

from __future__ import annotations

import os

import pytest

from tests.redis_server import RedisServer, RedisServerError

SERVER_KEY = pytest.StashKey[RedisServer]()


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


def session_server(config: pytest.Config) -> RedisServer:
    """Return the server this plugin started for the session."""
    try:
        return config.stash[SERVER_KEY]
    except KeyError:
        raise pytest.UsageError(
            "the test Redis was not started: run pytest from the project root so "
            "that addopts loads '-p tests.redis_plugin'"
        ) from None
