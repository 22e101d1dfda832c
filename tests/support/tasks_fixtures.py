"""Real workers for the task tests: ``manage.py ledger_worker`` processes on a namespace.

Test modules register them with ``pytest_plugins = ["tests.support.tasks_fixtures"]``. The
worker runs with ``tests.support.tasks_app.settings`` (the test project's, with the tests' task
app installed) against the suite's Redis, in the test's namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.redis_server import RedisServer, delete_namespace
from tests.support.tasks_helpers import TASK_QUEUES, WorkerProcess, task_settings


@pytest.fixture
def task_namespace(namespace: str) -> Iterator[str]:
    """A namespace of the test's own, with ``LEDGER`` pointing at it."""
    with task_settings(namespace):
        yield namespace


@pytest.fixture(scope="module")
def live_namespace(request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace for the module, ``LEDGER`` pointing at it, deleted at the end."""
    from tests.support.redis_plugin import session_server

    server: RedisServer = session_server(request.config)
    name = f"t{uuid.uuid4().hex[:16]}"
    with task_settings(name):
        yield name
    client = server.client()
    try:
        delete_namespace(client, name)
    finally:
        client.close()


@pytest.fixture(scope="module")
def live_worker(request: pytest.FixtureRequest, live_namespace: str) -> Iterator[WorkerProcess]:
    """A worker on every task queue of the module's namespace, for the whole module."""
    from tests.support.redis_plugin import session_server

    server: RedisServer = session_server(request.config)
    worker = WorkerProcess(
        server.url, live_namespace, *TASK_QUEUES, "--concurrency", "4", "--worker-id", "live-1"
    )
    yield worker
    code = worker.stop()
    assert code == 0, f"the worker exited {code}:\n{worker.output()}"
