"""What every agent process shares, and its entry point.

    python -m tests.support.harness.agent <role> <config.json> <index> <incarnation>

``role`` is ``producer``, ``worker`` or ``repairer``. Agents talk to Redis through the
harness's proxy only, with redis-py's own retries off, so every fault reaches the
ledger's caller as ``LedgerUnavailable``; they log what the ledger acknowledged to
files of their own, outside Redis, with one ``write`` per batch (a SIGKILL loses at
most the batch being written, never half a line).
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_ledger import Ledger, LedgerUnavailable
from tests.support.harness.config import Config

__all__ = ["Agent", "main"]

T = TypeVar("T")


class Agent:
    """One agent process: its ledger, its log, its stop flag."""

    def __init__(self, config: Config, role: str, index: int, incarnation: int) -> None:
        self.config = config
        self.role = role
        self.index = index
        self.incarnation = incarnation
        self.name = f"{role}-{index}-{incarnation}"
        self.random = random.Random(f"{config.seed}:{self.name}")
        self.client = redis.Redis.from_url(
            config.url,
            socket_timeout=config.socket_timeout,
            socket_connect_timeout=config.socket_timeout,
            retry=Retry(NoBackoff(), 0),
        )
        self.ledger = Ledger(self.client, config.namespace, config.queue, **config.ledger_kwargs())
        self.stopping = False
        self.unavailable = 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        self._log = os.open(config.path("logs", f"{self.name}.log"), flags, 0o644)
        signal.signal(signal.SIGTERM, self._stop)

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def log(self, lines: list[str]) -> None:
        """Append whole lines to this agent's log in one write."""
        if lines:
            os.write(self._log, ("\n".join(lines) + "\n").encode("utf-8"))

    def patiently(self, call: Callable[[], T], give_up_after: float | None = None) -> T | None:
        """Call until Redis answers, backing off on ``LedgerUnavailable``.

        Return ``None`` when told to stop, or after ``give_up_after`` seconds.
        """
        pause = 0.02
        started = time.monotonic()
        while True:
            try:
                return call()
            except LedgerUnavailable:
                self.unavailable += 1
                self.log(["E\tunavailable"])
            if self.stopping or (
                give_up_after is not None and time.monotonic() - started > give_up_after
            ):
                return None
            time.sleep(pause * (0.5 + self.random.random()))
            pause = min(pause * 2, 0.5)


def main(argv: list[str]) -> int:
    role, config_path, index, incarnation = argv
    config = Config.load(config_path)
    if role == "producer":
        from tests.support.harness.producer import run
    elif role == "worker":
        from tests.support.harness.worker import run
    elif role == "repairer":
        from tests.support.harness.repairer import run
    else:
        raise SystemExit(f"unknown role {role!r}")
    run(Agent(config, role, int(index), int(incarnation)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
