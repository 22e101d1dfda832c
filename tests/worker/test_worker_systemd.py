"""systemd's notification socket: a real worker says READY=1 and feeds the watchdog.

The test binds the datagram socket systemd would (``$NOTIFY_SOCKET``), asks for a
watchdog of one second (``$WATCHDOG_USEC``) and holds the worker's loop with the
documented test seam (``DJANGO_LEDGER_TEST_STALL_FILE``): the pings stop while the loop
stands still, and come back when it turns again.
"""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from django_ledger.core.worker.health import STALL_FILE_ENV
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess


@pytest.fixture
def notify_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    # A short path: a socket's path has room for about a hundred bytes.
    with tempfile.TemporaryDirectory(prefix="ledger-", dir="/tmp") as folder:
        path = str(Path(folder) / "notify")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(path)
            monkeypatch.setenv("NOTIFY_SOCKET", path)
            monkeypatch.setenv("WATCHDOG_USEC", "1000000")
            yield sock


def next_message(sock: socket.socket, within: float) -> str | None:
    sock.settimeout(within)
    try:
        return sock.recv(256).decode()
    except TimeoutError:
        return None


def test_ready_then_watchdog_pings_that_stop_while_the_loop_stands_still(
    redis_server: RedisServer,
    namespace: str,
    tmp_path: Path,
    notify_socket: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stall = tmp_path / "stall"
    monkeypatch.setenv(STALL_FILE_ENV, str(stall))
    args = ["raw", "--no-repair"]
    worker = WorkerProcess(redis_server.url, namespace, args, tmp_path / "worker.log")
    try:
        assert next_message(notify_socket, 60) == "READY=1", worker.output()
        assert next_message(notify_socket, 5) == "WATCHDOG=1"
        stall.touch()
        # The pings sent before the loop stood still a whole period, then none.
        for _ in range(10):
            if next_message(notify_socket, 2) is None:
                break
        else:
            raise AssertionError("the watchdog pings went on while the loop stood still")
        stall.unlink()
        assert next_message(notify_socket, 10) == "WATCHDOG=1"
    finally:
        worker.stop()
