"""A ledger of a test's own: ``LEDGER`` pointed at a throwaway server, in a fresh namespace.

Every test gets a namespace no other test uses (so tests share one server, in parallel,
with no ``FLUSHDB``), and its keys are deleted when it ends. ``shared_server()`` is the
process's one server, started on first use and stopped when the process exits.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.test import override_settings

from .redis import RedisServer, delete_namespace

__all__ = ["isolated_ledger", "ledger_settings_on", "shared_server"]

_lock = threading.Lock()
_shared: list[RedisServer] = []


def shared_server() -> RedisServer:
    """The process's throwaway redis-server, started on first use.

    Raises ``RedisServerError`` (saying how to install Redis) when none can be started.
    """
    with _lock:
        if not _shared or not _shared[0].running:
            server = RedisServer()
            try:
                server.start()
            except Exception:
                server.cleanup()
                raise
            _shared[:] = [server]
        return _shared[0]


def ledger_settings_on(server: RedisServer, namespace: str) -> dict[str, Any]:
    """The project's ``LEDGER`` with its connection on ``server`` and in ``namespace``."""
    ledger = copy.deepcopy(getattr(settings, "LEDGER", {}))
    ledger["CONNECTION"] = server.url
    ledger["NAMESPACE"] = namespace
    return ledger


@contextmanager
def isolated_ledger(server: RedisServer | None = None) -> Iterator[str]:
    """Point ``LEDGER`` at ``server`` (default: ``shared_server()``) in a new namespace.

    Yields the namespace; its keys are deleted at the end of the block.
    """
    server = server or shared_server()
    namespace = f"test-{uuid.uuid4().hex[:16]}"
    try:
        with override_settings(LEDGER=ledger_settings_on(server, namespace)):
            yield namespace
    finally:
        if server.running:
            client = server.client()
            try:
                delete_namespace(client, namespace)
            finally:
                client.close()
