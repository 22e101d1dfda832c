"""Real ``manage.py ledger_worker`` processes for the worker conservation run.

Each slot runs one worker at a time; every process that fills it is an *incarnation*
with a worker id of its own (``w<slot>.<incarnation>``), passed as ``--worker-id``, so
that a claim, a run and a log line name the very process. Workers serve the ``conserve``
queue of ``tests.support.bench_settings`` (``tests.support.bench_handlers.record_run`` logs each run to
``<workdir>/runs/runs-<worker id>.log``); their own output (one ``outcome=`` line per
settlement the ledger answered, warnings) goes to ``<workdir>/workers/<worker id>.out``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Incarnation", "WorkerFleet"]

ROOT = Path(__file__).resolve().parents[3]


def _die_with_parent() -> None:
    # Linux: a worker must not outlive a harness killed outright (a CI timeout).
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # best effort
        pass


@dataclass
class Incarnation:
    """One worker process: its id, and how it ended."""

    slot: int
    number: int
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.time)
    #: How the harness ended it ("kill", "term"), or "crash" when it ended on its own.
    ended_by: str = ""
    ended: float | None = None
    exit_code: int | None = None

    @property
    def worker_id(self) -> str:
        return f"w{self.slot}.{self.number}"


class WorkerFleet:
    """``count`` slots of ``ledger_worker`` processes on ``url``, restarted as they end."""

    def __init__(
        self,
        workdir: Path,
        url: str,
        namespace: str,
        queue: str,
        count: int,
        *,
        concurrency: int = 8,
        work_seconds: float = 0.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.workdir = workdir
        self.url = url
        self.namespace = namespace
        self.queue = queue
        self.count = count
        self.concurrency = concurrency
        self.work_seconds = work_seconds
        self.extra_args = extra_args
        self.runs_dir = workdir / "runs"
        self.out_dir = workdir / "workers"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        #: Every incarnation, in the order started.
        self.history: list[Incarnation] = []
        self.current: dict[int, Incarnation] = {}

    # -- starting and ending --------------------------------------------------------

    def start(self) -> None:
        for slot in range(self.count):
            self._spawn(slot)

    def _spawn(self, slot: int) -> Incarnation:
        number = sum(1 for i in self.history if i.slot == slot)
        worker_id = f"w{slot}.{number}"
        env = {
            **os.environ,
            "REDIS_URL": self.url,
            "LEDGER_NAMESPACE": self.namespace,
            "DJANGO_SETTINGS_MODULE": "tests.support.bench_settings",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "BENCH_RUNS_DIR": str(self.runs_dir),
            "BENCH_WORK_SECONDS": str(self.work_seconds),
        }
        args = [
            sys.executable,
            "manage.py",
            "ledger_worker",
            self.queue,
            "--worker-id",
            worker_id,
            "--concurrency",
            str(self.concurrency),
            "--shutdown-timeout",
            "15",
            *self.extra_args,
        ]
        out = (self.out_dir / f"{worker_id}.out").open("ab")
        try:
            process = subprocess.Popen(
                args,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        finally:
            out.close()
        incarnation = Incarnation(slot, number, process)
        self.history.append(incarnation)
        self.current[slot] = incarnation
        return incarnation

    def kill(self, slot: int) -> Incarnation:
        """SIGKILL the slot's worker and start its next incarnation; return the dead one."""
        dead = self.current[slot]
        dead.process.kill()
        dead.process.wait()
        self._ended(dead, "kill")
        self._spawn(slot)
        return dead

    def terminate(self, slot: int, timeout: float = 30.0) -> Incarnation:
        """SIGTERM the slot's worker, wait until it has stopped, start the next one."""
        stopping = self.current[slot]
        stopping.process.send_signal(signal.SIGTERM)
        try:
            stopping.process.wait(timeout)
        except subprocess.TimeoutExpired:
            stopping.process.kill()
            stopping.process.wait()
        self._ended(stopping, "term")
        self._spawn(slot)
        return stopping

    def _ended(self, incarnation: Incarnation, how: str) -> None:
        incarnation.ended_by = how
        incarnation.ended = time.time()
        incarnation.exit_code = incarnation.process.returncode

    def watch(self) -> None:
        """Restart a worker that ended on its own (and remember it as a crash)."""
        for slot, incarnation in list(self.current.items()):
            if incarnation.process.poll() is None:
                continue
            self._ended(incarnation, "crash")
            self._spawn(slot)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every worker (a clean stop), then SIGKILL what still runs."""
        live = [i for i in self.current.values() if i.process.poll() is None]
        for incarnation in live:
            incarnation.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for incarnation in live:
            try:
                incarnation.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                incarnation.process.kill()
                incarnation.process.wait()
            self._ended(incarnation, "stop")
        self.current.clear()

    def kill_all(self) -> None:
        for incarnation in self.current.values():
            if incarnation.process.poll() is None:
                incarnation.process.kill()
                incarnation.process.wait()

    # -- looking at them ------------------------------------------------------------

    def runs_log(self, incarnation: Incarnation) -> Path:
        return self.runs_dir / f"runs-{incarnation.worker_id}.log"

    def in_flight(self, incarnation: Incarnation) -> int:
        """Runs of this incarnation begun (``B``) and not ended (``E``), from its log."""
        try:
            lines = self.runs_log(incarnation).read_bytes().splitlines()
        except OSError:
            return 0
        open_runs: set[tuple[bytes, bytes]] = set()
        for line in lines:
            parts = line.split(b"\t")
            if parts[0] == b"B" and len(parts) >= 3:
                open_runs.add((parts[1], parts[2]))
            elif parts[0] == b"E" and len(parts) >= 3:
                open_runs.discard((parts[1], parts[2]))
        return len(open_runs)

    def started(self, incarnation: Incarnation) -> bool:
        """Whether the worker says it started (its signal handlers are in place)."""
        try:
            return b" started on " in (self.out_dir / f"{incarnation.worker_id}.out").read_bytes()
        except OSError:
            return False

    def wait_started(self, slot: int, patience: float = 30.0) -> bool:
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            if self.started(self.current[slot]):
                return True
            time.sleep(0.01)
        return False

    def wait_mid_run(self, slot: int, patience: float = 3.0) -> bool:
        """Wait until the slot's worker has a run in flight; say whether that came."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            incarnation = self.current[slot]
            if incarnation.process.poll() is None and self._tail_began(incarnation):
                return True
            time.sleep(0.002)
        return False

    def _tail_began(self, incarnation: Incarnation) -> bool:
        try:
            with self.runs_log(incarnation).open("rb") as handle:
                handle.seek(0, 2)
                size = handle.tell()
                handle.seek(max(0, size - 300))
                tail = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        except OSError:
            return False
        return tail.startswith(b"B\t")
