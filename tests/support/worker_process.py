"""Start ``manage.py ledger_worker`` as a real process on the suite's redis-server.

The worker reads ``tests.support.worker_settings`` (the test project plus raw queues whose
handlers are in ``tests.support.worker_handlers``) in the test's own namespace.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    """One ``ledger_worker`` subprocess; its output goes to a file for the test to read."""

    def __init__(
        self,
        redis_url: str,
        namespace: str,
        args: list[str],
        log: Path,
        settings: str = "tests.support.worker_settings",
    ) -> None:
        env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "LEDGER_NAMESPACE": namespace,
            "DJANGO_SETTINGS_MODULE": settings,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "ledger_worker", *args],
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        if not self._out.closed:
            self._out.flush()
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            self._out.close()

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._out.close()


def wait_until(condition: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    """Poll ``condition`` until it is truthy; fail the test (not hang it) at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(0.02)
