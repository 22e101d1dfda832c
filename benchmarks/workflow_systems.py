"""The systems ``benchmarks/workflow_bench.py`` runs a chord on: Celery's, the ledger's, and
the ledger's plain tasks, each started as a worker process against the bench's Redis."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    pass

NAMESPACE = "wfbench"
QUEUE = "wfbench"
SETTINGS = "tests.support.workflow_bench_settings"
POLL = 0.002
SYSTEMS = ["ledger", "celery", "ledger-plain"]
SCRIPT_COMMANDS = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_evalsha_ro", "cmdstat_fcall")


def venv_bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "BENCH_REDIS_URL": url,
        "REDIS_URL": url,
        "LEDGER_NAMESPACE": NAMESPACE,
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "PYTHONPATH": str(ROOT),
        "DATABASE_PATH": os.environ.get("DATABASE_PATH", "/tmp/workflow-bench.sqlite3"),
    }


def command_calls(client: Any) -> Counter[str]:
    stats = client.info("commandstats")
    return Counter({name: int(value["calls"]) for name, value in stats.items()})


def stop_worker(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the worker's process group, then SIGKILL what is left after 20 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


# -- the systems --------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one timed run found."""

    seconds: float
    ok: bool
    detail: str = ""
    polls: int = 0  # commands of the bench's own waiting, taken out of the window
    poll_command: str = ""


class System:
    """One worker process per run: start it, warm it, time a chord, count a chord."""

    name = ""
    #: a short account of how it runs, printed in the header
    how = ""

    def __init__(self, url: str, client: Any, logs: Path) -> None:
        self.url, self.client, self.logs = url, client, logs

    def command(self) -> list[str]:
        raise NotImplementedError

    def warm(self) -> None:
        """Return once the running worker has run one task."""
        raise NotImplementedError

    def timed(self, steps: int) -> Outcome:
        """Build, enqueue and wait for one chord; return the figures."""
        raise NotImplementedError

    def enqueue(self, steps: int) -> Callable[[], bool]:
        """Enqueue a chord with no worker running; return a check: is it done?

        The check is one command on ``self.client`` (the bench's, whose commands the
        count leaves out)."""
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return _env(self.url)

    def start(self) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{self.name}.log").open("ab")
        try:
            return subprocess.Popen(
                self.command(),
                cwd=ROOT,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()


class Celery(System):
    name = "celery"
    how = "celery worker --pool threads --concurrency 8, Redis broker + Redis result backend"

    def __init__(self, url: str, client: Any, logs: Path) -> None:
        super().__init__(url, client, logs)
        os.environ["BENCH_REDIS_URL"] = url
        from benchmarks import workflow_peers

        self.peers = workflow_peers

    def command(self) -> list[str]:
        return [
            venv_bin("celery"),
            "-A",
            "benchmarks.workflow_peers:celery",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            "8",
            "--loglevel",
            "WARNING",
        ]

    def env(self) -> dict[str, str]:
        # Plain Celery: without DJANGO_SETTINGS_MODULE its Django fix-up stays off (it
        # would close stale database connections around each task), the faster way.
        env = _env(self.url)
        env.pop("DJANGO_SETTINGS_MODULE")
        return env

    def warm(self) -> None:
        self.peers.step.delay(-1).get(timeout=120)

    def _chord(self, steps: int) -> Any:
        from celery import chord

        step, collect = self.peers.step, self.peers.collect
        return chord(step.s(i) for i in range(steps))(collect.s())

    def timed(self, steps: int) -> Outcome:
        began = time.perf_counter()
        result = self._chord(steps)
        value = result.get(timeout=max(600.0, steps / 10))
        seconds = time.perf_counter() - began
        ok = value == [steps, 1]
        return Outcome(seconds, ok, "" if ok else f"callback returned {value!r}")

    def enqueue(self, steps: int) -> Callable[[], bool]:
        result = self._chord(steps)
        key = f"celery-task-meta-{result.id}"
        return lambda: bool(self.client.exists(key))


class Ledger(System):
    """The ledger's chord (``django_ledger.tasks.workflows``); see ``_ledger_chord``."""

    name = "ledger"
    how = "manage.py ledger_worker wfbench (defaults: concurrency 8, prefetch 8)"

    def __init__(self, url: str, client: Any, logs: Path) -> None:
        super().__init__(url, client, logs)
        _django(url)
        self.options: list[str] = []

    def command(self) -> list[str]:
        return [sys.executable, "manage.py", "ledger_worker", QUEUE, *self.options]

    def warm(self) -> None:
        from tests.support.workflow_bench_app.tasks import step

        result = step.enqueue(-1)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            result.refresh()
            if result.is_finished:
                if result.status.name != "SUCCESSFUL":
                    raise RuntimeError(f"the warm-up task ended {result.status.name}")
                return
            time.sleep(0.01)
        raise RuntimeError("the ledger worker ran no warm-up task in 120 s")

    def completed(self) -> Callable[[], int]:
        from django_ledger import State
        from django_ledger.queues import queues

        key = queues.get(QUEUE).ledger.terminal_keys[State.COMPLETED]
        return lambda: int(self.client.zcard(key))

    def _chord(self, steps: int) -> Any:
        from django_ledger.tasks.workflows import chord, sig
        from tests.support.workflow_bench_app.tasks import collect, step

        return chord([sig(step, i) for i in range(steps)], sig(collect)).enqueue()

    def _read(self, handle: Any, steps: int) -> Any:
        from tests.support.workflow_bench_app.tasks import collect

        return collect.get_result(handle.task_ids[str(steps)]).return_value

    def timed(self, steps: int) -> Outcome:
        count = self.completed()
        before = count()
        began = time.perf_counter()
        handle = self._chord(steps)
        polls = 0
        deadline = began + max(600.0, steps / 10)
        # Wait on the count of completed records (one ZCARD a poll, taken out of the
        # figures), then read the callback's result as a user does, through its task.
        while count() < before + steps + 1 and time.perf_counter() < deadline:
            polls += 1
            time.sleep(POLL)
        polls += 1
        value = self._read(handle, steps)
        seconds = time.perf_counter() - began
        ok = value == [steps, 1]
        return Outcome(
            seconds, ok, "" if ok else f"callback returned {value!r}", polls, "cmdstat_zcard"
        )

    def enqueue(self, steps: int) -> Callable[[], bool]:
        count = self.completed()
        before = count()
        self._chord(steps)
        return lambda: count() >= before + steps + 1


class LedgerPlain(Ledger):
    name = "ledger-plain"
    how = "the same worker; independent no-op tasks by enqueue_many, no workflow"

    def _enqueue(self, steps: int) -> None:
        from django_ledger.tasks import enqueue_many
        from tests.support.workflow_bench_app.tasks import step

        for start in range(0, steps, 1024):
            enqueue_many(step, [((i,), {}) for i in range(start, min(steps, start + 1024))])

    def timed(self, steps: int) -> Outcome:
        count = self.completed()
        before = count()
        began = time.perf_counter()
        self._enqueue(steps)
        polls = 0
        deadline = began + max(600.0, steps / 10)
        while True:
            done = count() - before
            polls += 1
            if done >= steps or time.perf_counter() > deadline:
                break
            time.sleep(POLL)
        seconds = time.perf_counter() - began
        ok = done == steps
        return Outcome(seconds, ok, f"{done} of {steps} done", polls, "cmdstat_zcard")

    def enqueue(self, steps: int) -> Callable[[], bool]:
        count = self.completed()
        before = count()
        self._enqueue(steps)
        return lambda: count() >= before + steps


def _django(url: str) -> None:
    os.environ.update(
        {
            k: v
            for k, v in _env(url).items()
            if k in ("REDIS_URL", "LEDGER_NAMESPACE", "DATABASE_PATH")
        }
    )
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()


CLASSES: dict[str, type[System]] = {"ledger": Ledger, "celery": Celery, "ledger-plain": LedgerPlain}
