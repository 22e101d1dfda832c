"""``manage.py ledger_scheduler`` as real processes on the suite's redis-server.

Several schedulers started together admit each fire once; one SIGKILLed between its
dispatch claim and its admission leaves the fire to the next tick, which finishes it
once; a scheduler whose clock is hours off fires by the server's clock; SIGTERM and
SIGINT stop the loop cleanly. Each test waits on conditions with deadlines.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_ledger.core.dispatch import RedisDispatchRegistry
from django_ledger.core.ledger import Ledger
from django_ledger.core.schedule import FIRE_LEASE_MS, ScheduleStore, state_key
from django_ledger.services.scheduler import KILL_AFTER_CLAIM_ENV
from tests.support.redis_server import RedisServer, delete_namespace
from tests.support.worker_process import wait_until

ROOT = Path(__file__).resolve().parents[2]
TASK = "tests.support.tasks_app.tasks.noop"
ADMITTED = re.compile(r"^admitted schedule:(\S+):(\d+) at \S+( \(recovered\))? node=(\S+)$", re.M)
# A clock this far off, run through manage.py: time.time() is what a node's clock is.
SKEWED = (
    "import runpy, sys, time; real = time.time; time.time = lambda: real() + {skew}; "
    "sys.argv = ['manage.py', *sys.argv[1:]]; runpy.run_path('manage.py', run_name='__main__')"
)


class Scheduler:
    """One ``ledger_scheduler`` process; its output goes to a file."""

    def __init__(
        self, log: Path, env: dict[str, str], *args: str, clock_skew: float | None = None
    ) -> None:
        self.log = log
        self._out = log.open("wb")
        if clock_skew is None:
            command = [sys.executable, str(ROOT / "manage.py")]
        else:
            command = [sys.executable, "-c", SKEWED.format(skew=clock_skew)]
        self.process = subprocess.Popen(
            [*command, "ledger_scheduler", "--interval", "0.2", *args],
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def admitted(self) -> list[tuple[str, int, bool]]:
        return [(k, int(e), bool(r)) for k, e, r, _ in ADMITTED.findall(self.output)]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        finally:
            self._out.close()


class Setup:
    """A namespace and schedule key of the test's own, and how to start schedulers."""

    def __init__(self, server: RedisServer, client: redis.Redis, tmp_path: Path) -> None:
        self.namespace = f"t{uuid.uuid4().hex[:12]}"
        self.key = f"beat-{self.namespace}"
        self.client = client
        self.tmp_path = tmp_path
        self.url = server.url
        self.store = ScheduleStore(client, self.namespace)
        self.registry = RedisDispatchRegistry(client, namespace="kaal")  # the settings' default
        self.ledger = Ledger(client, self.namespace, "default")
        self.started: list[Scheduler] = []

    def start(
        self,
        schedule: dict[str, Any],
        *,
        extra_env: dict[str, str] | None = None,
        clock_skew: float | None = None,
    ) -> Scheduler:
        env = {name: value for name, value in os.environ.items() if name != KILL_AFTER_CLAIM_ENV}
        env.update(
            REDIS_URL=self.url,
            DJANGO_SETTINGS_MODULE="testproject.settings",
            LEDGER_NAMESPACE=self.namespace,
            LEDGER_SCHEDULES=json.dumps({self.key: schedule}),
            PYTHONPATH=str(ROOT),
            **(extra_env or {}),
        )
        log = self.tmp_path / f"scheduler-{len(self.started)}.log"
        process = Scheduler(log, env, clock_skew=clock_skew)
        self.started.append(process)
        return process

    def seed(self) -> int:
        """Start the schedule's state at the server's now; return that second."""
        now = self.store.server_time_ms() // 1000
        self.store.set_through(self.key, now)
        return now

    def dispatched(self) -> list[int]:
        return sorted(int(d.fire_time.timestamp()) for d in self.registry.history(self.key, 1000))

    def records(self) -> list[str]:
        return sorted(k.decode() for k in self.client.hkeys(self.ledger.records_key))

    def cleanup(self) -> None:
        for process in self.started:
            if process.process.poll() is None:
                process.process.kill()
                process.process.wait()
        self.client.delete(state_key(self.namespace), self.registry.build_index_key(self.key))
        for key in self.client.scan_iter(match=f"kaal:cron_dispatch:{self.key}:*"):
            self.client.delete(key)
        delete_namespace(self.client, self.namespace)


@pytest.fixture
def setup(redis_server: RedisServer, redis_client: redis.Redis, tmp_path: Path) -> Iterator[Setup]:
    found = Setup(redis_server, redis_client, tmp_path)
    yield found
    found.cleanup()


EVERY_SECOND = {"TASK": TASK, "EVERY": 1, "MISFIRE": "all", "GRACE": 120}


def test_three_schedulers_started_together_admit_each_fire_once(setup: Setup) -> None:
    start = setup.seed()
    processes = [setup.start(EVERY_SECOND) for _ in range(3)]
    # Each says "schedules" once its signal handlers are in place: a SIGTERM before that
    # (a slow start on a busy machine) would kill it, not stop it.
    wait_until(lambda: all(": schedules " in p.output for p in processes), 60, "three schedulers")

    wait_until(lambda: len(setup.dispatched()) >= 12, 60, "twelve fires dispatched")
    codes = [process.stop() for process in processes]

    assert codes == [0, 0, 0], [p.output[-2000:] for p in processes]
    assert all("stopped after" in p.output for p in processes)
    through = setup.store.snapshot().through[setup.key]
    due = list(range(start + 1, through + 1))
    assert len(due) >= 12
    # Every fire due has one dispatch record and one ledger record, and nothing else does.
    assert setup.dispatched() == due
    assert setup.records() == sorted(f"schedule:{setup.key}:{epoch}" for epoch in due)
    # Across the three processes, each fire was answered ADMITTED exactly once.
    admitted = Counter(epoch for p in processes for _, epoch, _ in p.admitted())
    assert sorted(admitted) == due and set(admitted.values()) == {1}
    assert setup.store.snapshot().pending == {}


def test_a_scheduler_killed_between_claim_and_admission_leaves_the_fire_to_the_next_tick(
    setup: Setup,
) -> None:
    setup.seed()
    dying = setup.start(EVERY_SECOND, extra_env={KILL_AFTER_CLAIM_ENV: setup.key})

    assert dying.process.wait(60) == -signal.SIGKILL, dying.output[-2000:]
    (request_id,) = re.findall(r"kill-after-claim (\S+)", dying.output)
    epoch = int(request_id.rsplit(":", 1)[1])
    claim = setup.registry.find_dispatch(setup.key, epoch)
    assert claim is not None and claim.status == "dispatched"
    assert setup.ledger.resolve(request_id) is None  # claimed, never admitted
    assert epoch in setup.store.snapshot().pending[setup.key]

    survivor = setup.start(EVERY_SECOND)
    wait_until(lambda: setup.ledger.resolve(request_id), 30 + FIRE_LEASE_MS / 1000, "the fire")
    wait_until(lambda: (setup.key, epoch, True) in survivor.admitted(), 30, "its log line")
    assert survivor.stop() == 0

    record = setup.registry.find_dispatch(setup.key, epoch)
    assert record is not None and record.status == "recovered"
    assert record.node_id != claim.node_id
    assert setup.records().count(request_id) == 1
    assert [e for _, e, _ in survivor.admitted()].count(epoch) == 1
    assert epoch not in setup.store.snapshot().pending.get(setup.key, {})


@pytest.mark.parametrize("hours", [5, -3])
def test_a_scheduler_whose_clock_is_hours_off_fires_by_the_server_clock(
    setup: Setup, hours: int
) -> None:
    start = setup.seed()
    skewed = setup.start(EVERY_SECOND, clock_skew=hours * 3600)

    wait_until(lambda: len(setup.dispatched()) >= 3, 90, "three fires")
    assert skewed.stop() == 0, skewed.output[-2000:]

    server_now = setup.store.server_time_ms() // 1000
    fired = [epoch for _, epoch, _ in skewed.admitted()]
    assert fired and fired == list(range(start + 1, start + 1 + len(fired)))
    assert all(start < epoch <= server_now for epoch in fired)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_loop_cleanly(setup: Setup, sig: int) -> None:
    setup.seed()
    process = setup.start({"TASK": TASK, "CRON": "0 3 * * *"})

    wait_until(lambda: "schedules beat-" in process.output, 90, "the scheduler to start")

    assert process.stop(sig) == 0
    assert "stopped after" in process.output
