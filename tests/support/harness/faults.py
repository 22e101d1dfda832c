"""The fault injector: a schedule of faults over the run, and how each is done.

Faults that hit Redis itself (``FUNCTION FLUSH``, garbage) go over a direct connection,
not the proxy. Garbage is written with a plain ``HSET`` over a stored record, as a
disk or a buggy writer would: it is remembered, so the checker expects exactly those
ids in quarantine.
"""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import redis

from django_ledger import CorruptRecord
from django_ledger.core.records import decode_record
from tests.support.harness.config import FAULT_KINDS, Config
from tests.support.harness.fleet import Fleet
from tests.support.harness.proxy import FaultProxy
from tests.support.redis_server import RedisServer

__all__ = ["Injector", "schedule"]


def schedule(config: Config, rng: random.Random) -> list[tuple[float, str]]:
    """Return (seconds after the start, kind) for every fault of the run, in time order.

    Every kind appears at least its minimum number of times; long runs add more at
    random, one every ``fault_interval`` seconds on average. The first fault waits a
    little, so that work is flowing when it lands.
    """
    kinds = [kind for kind in FAULT_KINDS for _ in range(config.min_faults.get(kind, 0))]
    start = min(1.5, config.duration / 10)
    span = max(config.duration - start, 0.1)
    extra = int(span / config.fault_interval) - len(kinds)
    kinds += [rng.choice(FAULT_KINDS) for _ in range(max(0, extra))]
    rng.shuffle(kinds)
    step = span / max(len(kinds), 1)
    return [(start + step * (i + rng.random() * 0.5), kind) for i, kind in enumerate(kinds)]


class Injector:
    """Do faults on a run's Redis, proxy and workers, and count them."""

    def __init__(
        self,
        config: Config,
        server: RedisServer,
        proxy: FaultProxy,
        fleet: Fleet,
        rng: random.Random,
    ) -> None:
        self.config = config
        self.server = server
        self.proxy = proxy
        self.fleet = fleet
        self.rng = rng
        self.counts: Counter[str] = Counter()
        #: Ids whose stored bytes the injector overwrote with garbage.
        self.garbage: set[str] = set()
        self.records_key = f"{{{config.namespace}:{config.queue}}}:records"
        self._paused: list[threading.Thread] = []
        self._waking = threading.Event()

    def do(self, kind: str) -> None:
        action = self.garbage_records if kind == "garbage" else getattr(self, kind)
        action()
        self.counts[kind] += 1

    def direct(self) -> redis.Redis:
        return self.server.client(socket_timeout=5, socket_connect_timeout=5)

    # -- the faults -----------------------------------------------------------------

    def worker_kill(self) -> None:
        """SIGKILL a worker while it holds claims (it is restarted at once)."""
        member = self.rng.choice(self.fleet.of("worker"))
        _wait_mid_lease(self.config.path("logs", f"{member.name}.log"))
        self.fleet.kill(member)

    def worker_pause(self) -> None:
        """SIGSTOP a worker holding claims until others have its records, then SIGCONT it.

        The process pause of the fencing-token argument: while it sleeps, its leases
        expire, repair gives its records back and other workers claim them; when it
        wakes it settles claims that are no longer its own, which must answer LOST.
        It sleeps until its leases have expired and two repair cycles have finished
        since (long queues have long cycles), at most a minute.
        """
        member = self.rng.choice(self.fleet.of("worker"))
        holding = _wait_mid_lease(self.config.path("logs", f"{member.name}.log"))
        process = member.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGSTOP)
        self.counts["worker_pause_holding"] += holding
        expired = time.monotonic() + self.config.lease_seconds * 2
        thread = threading.Thread(target=self._sleep, args=(process, expired), daemon=True)
        thread.start()
        self._paused.append(thread)

    def _sleep(self, process: subprocess.Popen[bytes], expired: float) -> None:
        deadline = expired + 60
        while not self._waking.wait(0.2) and time.monotonic() < expired:
            pass
        cycles = _repair_cycles(self.config.path("logs"))
        while not self._waking.wait(0.2) and time.monotonic() < deadline:
            if _repair_cycles(self.config.path("logs")) >= cycles + 2:
                break
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)

    @property
    def pausing(self) -> bool:
        """Whether a paused worker is still asleep."""
        return any(thread.is_alive() for thread in self._paused)

    def resume_all(self) -> None:
        """Wake every paused worker now (at the end of a run, whatever happened)."""
        self._waking.set()
        for thread in self._paused:
            thread.join()

    def redis_kill(self) -> None:
        """SIGKILL Redis, leave it down a moment, restart it from its AOF on the same port."""
        self.server.kill()
        time.sleep(0.3 + self.rng.random())
        self.server.restart()
        client = self.direct()
        try:
            # Up is not ready: wait until the AOF is loaded.
            while client.info("persistence").get("loading"):
                time.sleep(0.05)
        finally:
            client.close()

    def proxy_drop(self) -> None:
        self.proxy.fault("drop", 0.2 + self.rng.random() * 0.8)

    def proxy_stall(self) -> None:
        # Longer than the clients' socket timeout: they give up, Redis may still run
        # their requests when the stall ends.
        self.proxy.fault("stall", self.config.socket_timeout * (1.2 + self.rng.random()))

    def proxy_half_close(self) -> None:
        self.proxy.fault("half_close", 0.3 + self.rng.random() * 0.7)

    def function_flush(self) -> None:
        client = self.direct()
        try:
            client.function_flush()
        finally:
            client.close()

    def garbage_records(self) -> int:
        """Overwrite a few stored records with bytes that do not decode."""
        client = self.direct()
        written = 0
        try:
            fields = client.hrandfield(self.records_key, self.config.garbage_per_fault * 3) or []
            for field in fields:
                request_id = field.decode("utf-8")
                if request_id in self.garbage or written >= self.config.garbage_per_fault:
                    continue
                raw = client.hget(self.records_key, request_id)
                if raw is None:
                    continue
                bad = self._spoil(request_id, raw)
                client.hset(self.records_key, request_id, bad)
                self.garbage.add(request_id)
                written += 1
        finally:
            client.close()
        self.counts["garbage_records"] += written
        return written

    def _spoil(self, request_id: str, raw: bytes) -> bytes:
        """Return ``raw`` spoiled one of three ways: a flipped byte, cut short, or noise."""
        way = self.rng.randrange(3)
        if way == 0:
            at = self.rng.randrange(11, len(raw))
            bad = raw[:at] + bytes([raw[at] ^ 0x20]) + raw[at + 1 :]
        elif way == 1:
            bad = raw[: self.rng.randrange(1, len(raw))]
        else:
            bad = b"garbage " + self.rng.randbytes(16)
        try:
            decode_record(request_id, bad)
        except CorruptRecord:
            return bad
        return b"garbage " + self.rng.randbytes(16)


def _repair_cycles(logs: Path) -> int:
    """Count the repair cycles the repair loop has finished so far."""
    total = 0
    for path in logs.glob("repairer-*.log"):
        with path.open("rb") as handle:
            total += sum(1 for line in handle if line.startswith(b"R\t"))
    return total


def _wait_mid_lease(log: Path, patience: float = 2.0) -> bool:
    """Wait until the worker's last log line is a grant: it holds claims and works.

    Return whether that moment came within ``patience`` seconds.
    """
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        try:
            with log.open("rb") as handle:
                handle.seek(0, 2)
                size = handle.tell()
                handle.seek(max(0, size - 200))
                tail = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        except OSError:
            tail = b""
        if tail.startswith(b"G\t"):
            return True
        time.sleep(0.003)
    return False
