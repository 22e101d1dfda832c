"""A master with one replica, each a redis-server of the suite's own on a free port."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.redis_server import RedisServer

__all__ = ["SYNC_TIMEOUT", "master_and_replica", "wait_for_sync"]

SYNC_TIMEOUT = 30.0


def wait_for_sync(replica: RedisServer) -> None:
    """Wait until ``replica``'s link to its master is up; fail the test at the deadline."""
    deadline = time.monotonic() + SYNC_TIMEOUT
    with replica.client() as client:
        while time.monotonic() < deadline:
            if client.info("replication").get("master_link_status") == "up":
                return
            time.sleep(0.02)
    raise AssertionError(f"{replica!r} did not sync with its master in {SYNC_TIMEOUT:.0f} s")


@contextmanager
def master_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    """A master and its replica, in sync, stopped at the end."""
    master = RedisServer(extra_args=["--repl-diskless-sync-delay", "0"])
    master.start()
    replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(master.port)])
    try:
        replica.start()
        wait_for_sync(replica)
        yield master, replica
    finally:
        replica.cleanup()
        master.cleanup()
