"""One queue's keys and scripts on one client: the plumbing both paths of the ledger share.

``Runner.run`` calls a script with the queue's keys (EVALSHA, and on NOSCRIPT one EVAL
with the source), ``translate_errors`` turns redis-py's errors into the ledger's, and
``server_time_ms`` reads the Redis server clock. The fused path (``fused.py``), the
reference path (``reference.py``) and ``Ledger`` (the facade choosing one) all build on
it; it imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis as redis_py

from .records import State
from .scripts import Scripts
from .transport import Translate

__all__ = ["KEY_NAMES", "Runner"]

#: The suffixes of a queue's keys, in the order every script takes them in ``KEYS``.
KEY_NAMES = (
    "records",
    "ready",
    "leases",
    "gate",
    "quarantine",
    "completed",
    "failed",
    "dead",
    "fences",
    "results",
)


class Runner:
    """Run one queue's scripts on a redis-py client (``Redis`` or ``RedisCluster``)."""

    def __init__(self, redis: Any, namespace: str, queue: str, label: str) -> None:
        self.redis = redis
        tag = "{%s:%s}" % (namespace, queue)  # noqa: UP031 - braces are the hash tag
        self.keys: tuple[str, ...] = tuple(f"{tag}:{name}" for name in KEY_NAMES)
        self.scripts = Scripts(redis)
        self.label = label
        #: Test seam: milliseconds added to the Redis server clock inside every script.
        self.clock_skew_ms = 0

    def __repr__(self) -> str:
        return self.label

    @property
    def records_key(self) -> str:
        return self.keys[0]

    @property
    def ready_key(self) -> str:
        return self.keys[1]

    @property
    def leases_key(self) -> str:
        return self.keys[2]

    @property
    def gate_key(self) -> str:
        return self.keys[3]

    @property
    def quarantine_key(self) -> str:
        return self.keys[4]

    @property
    def fences_key(self) -> str:
        return self.keys[8]

    @property
    def results_key(self) -> str:
        return self.keys[9]

    @property
    def terminal_keys(self) -> dict[State, str]:
        """The indexes of terminal records, scored by when they ended."""
        return {State.COMPLETED: self.keys[5], State.FAILED: self.keys[6], State.DEAD: self.keys[7]}

    def run(self, script: Any, args: Sequence[Any]) -> Any:
        """Run one of this queue's scripts, with errors in the ledger's terms.

        EVALSHA first; on NOSCRIPT, EVAL with the source. redis-py's own recovery
        (SCRIPT LOAD, then EVALSHA again) leaves a window in which another flush
        reaches the caller; EVAL has none.
        """
        keys = self.keys
        with self.translate_errors():
            try:
                return self.redis.evalsha(script.sha, len(keys), *keys, self.clock_skew_ms, *args)
            except redis_py.exceptions.NoScriptError:
                return self.redis.eval(script.script, len(keys), *keys, self.clock_skew_ms, *args)

    def translate_errors(self) -> Translate:
        return Translate(self)

    def server_time_ms(self) -> int:
        """Return the Redis server's clock (plus the test skew) in epoch milliseconds."""
        with self.translate_errors():
            seconds, micros = self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000 + self.clock_skew_ms

    def now_and_raw(self, request_id: str) -> tuple[int, bytes | None]:
        """Read the server clock and one record's bytes in one round trip."""
        with self.translate_errors():
            pipe = self.redis.pipeline(transaction=False)
            pipe.time()
            pipe.hget(self.records_key, request_id)
            (seconds, micros), raw = pipe.execute()
        return int(seconds) * 1000 + int(micros) // 1000 + self.clock_skew_ms, raw
