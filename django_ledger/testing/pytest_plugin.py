"""The testing kit's pytest fixtures. Load them in your ``conftest.py``::

    pytest_plugins = ["django_ledger.testing.pytest_plugin"]

(or ``-p django_ledger.testing.pytest_plugin`` on the command line). ``ledger_redis``
gives a test a ledger of its own: ``LEDGER`` points at a throwaway ``redis-server``
(one per test process, on a free port) in a namespace no other test uses, deleted after.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .redis import RedisServer, RedisServerError


@pytest.fixture(scope="session")
def ledger_redis_server() -> RedisServer:
    """The test process's throwaway redis-server (``REDIS_SERVER_BIN`` or ``PATH``'s)."""
    from .isolation import shared_server

    try:
        return shared_server()
    except RedisServerError as error:
        pytest.fail(f"the ledger's tests need Redis: {error}", pytrace=False)


@pytest.fixture
def ledger_redis(ledger_redis_server: RedisServer) -> Iterator[RedisServer]:
    """``LEDGER`` on the throwaway server, in a namespace of this test's own."""
    from .isolation import isolated_ledger

    with isolated_ledger(ledger_redis_server):
        yield ledger_redis_server
