"""The proof of conservation for schedules: fires admitted = fires due, none twice.

Run from the repository root (docs/reliability.md, "Schedules", explains the figures):

    python -m benchmarks.schedule_conservation --schedulers 3 --duration 300

It starts its own redis-server (AOF, ``appendfsync always``) on a free port, seeds three
schedules (every second, every 3 seconds, and a six-field cron every 2 seconds in
Europe/Paris; all ``MISFIRE: all`` with a grace longer than the run, so that every fire
of the run is due whatever is down), runs ``manage.py ledger_scheduler`` processes, and
for ``--duration`` seconds SIGKILLs schedulers (some between their dispatch claim and
their admission, and now and then all of them for a few seconds), SIGSTOPs them past
their fire lease, SIGKILLs and restarts Redis, and flushes the ledger's functions. Then it lets the schedulers catch up, stops them, and checks
every fire of every schedule against the ledger, the dispatch registry and the
schedulers' logs. The exit status is 0 for PASS. ``tests/schedule/test_schedule_conservation.py``
is the short run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from django_ledger.core.dispatch import RedisDispatchRegistry  # noqa: E402
from django_ledger.core.schedule import Cron, Every, ScheduleStore, Timing, zone_of  # noqa: E402
from django_ledger.services.scheduler import KILL_AFTER_CLAIM_ENV  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

NAMESPACE = "sched"
TASK = "tests.support.tasks_app.tasks.noop"
SCHEDULES: dict[str, dict[str, Any]] = {
    "every-1s": {"TASK": TASK, "EVERY": 1},
    "every-3s": {"TASK": TASK, "EVERY": 3, "PRIORITY": 5},
    "cron-2s-paris": {"TASK": TASK, "CRON": "*/2 * * * * *", "TIMEZONE": "Europe/Paris"},
}
TIMINGS: dict[str, Timing] = {
    "every-1s": Every(1),
    "every-3s": Every(3),
    "cron-2s-paris": Cron("*/2 * * * * *", zone_of("Europe/Paris")),
}
FAULT_KINDS = ("kill", "kill-mid-fire", "pause", "fleet-down", "redis-restart", "function-flush")
ADMITTED = re.compile(r"^admitted schedule:(\S+):(\d+) at ", re.M)


@dataclass
class Config:
    schedulers: int = 3
    duration: float = 300.0
    fault_interval: float = 3.0
    min_faults: int = 2
    pause_seconds: float = 7.0
    down_seconds: float = 4.0
    seed: int = 20_240_601
    workdir: str = ""
    drain_timeout: float = 120.0


@dataclass
class Outcome:
    due: dict[str, int] = field(default_factory=dict)
    admitted: dict[str, int] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    undispatched: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    mid_fire_kills: int = 0
    pending_left: int = 0
    drained: bool = False

    @property
    def passed(self) -> bool:
        return self.drained and not (self.lost or self.extra or self.twice or self.undispatched)

    @property
    def table(self) -> str:
        rows = [
            "| schedule | fires due | admitted | lost | extra | admitted twice |",
            "|---|---|---|---|---|---|",
        ]
        for key in SCHEDULES:
            lost = sum(1 for r in self.lost if r.startswith(f"schedule:{key}:"))
            extra = sum(1 for r in self.extra if r.startswith(f"schedule:{key}:"))
            twice = sum(1 for r in self.twice if r.startswith(f"schedule:{key}:"))
            rows.append(
                f"| {key} | {self.due[key]} | {self.admitted[key]} | {lost} | {extra} | {twice} |"
            )
        faults = ", ".join(f"{kind} {self.faults[kind]}" for kind in FAULT_KINDS)
        statuses = ", ".join(f"{s} {n}" for s, n in sorted(self.statuses.items()))
        rows += [
            "",
            f"faults: {faults} (schedulers killed between claim and admission: "
            f"{self.mid_fire_kills})",
            f"dispatch records: {statuses}; without one: {len(self.undispatched)}",
            f"pending left: {self.pending_left}; drained: {self.drained}",
            f"RESULT: {'PASS' if self.passed else 'FAIL'}",
        ]
        return "\n".join(rows)


class Fleet:
    """The scheduler processes, each slot restarted when the injector kills it."""

    def __init__(self, config: Config, url: str, workdir: Path) -> None:
        self.config, self.url, self.workdir = config, url, workdir
        self.slots: list[subprocess.Popen[bytes] | None] = [None] * config.schedulers
        self.logs: list[Path] = []
        #: While ``time.monotonic()`` is below this, no slot is restarted (a fleet outage).
        self.down_until = 0.0

    def start(self, slot: int, *, kill_mid_fire: str | None = None) -> None:
        # The experiment's own Redis only: not a cluster the suite may have set up.
        env = {
            k: v for k, v in os.environ.items() if k not in (KILL_AFTER_CLAIM_ENV, "REDIS_CLUSTER")
        }
        env.update(
            REDIS_URL=self.url,
            DJANGO_SETTINGS_MODULE="testproject.settings",
            LEDGER_NAMESPACE=NAMESPACE,
            LEDGER_SCHEDULES=json.dumps(
                {k: {**v, "MISFIRE": "all", "GRACE": 10 * 3600} for k, v in SCHEDULES.items()}
            ),
            PYTHONPATH=str(ROOT),
        )
        if kill_mid_fire:
            env[KILL_AFTER_CLAIM_ENV] = kill_mid_fire
        log = self.workdir / f"scheduler-{slot}-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.slots[slot] = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "ledger_scheduler", "--interval", "0.2"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def running(self) -> list[int]:
        return [i for i, p in enumerate(self.slots) if p is not None and p.poll() is None]

    def revive(self) -> None:
        """Start a plain scheduler in every slot whose process has ended."""
        if time.monotonic() < self.down_until:
            return
        for slot, process in enumerate(self.slots):
            if process is None or process.poll() is not None:
                self.start(slot)

    def stop(self) -> None:
        for process in self.slots:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.terminate()
        for process in self.slots:
            if process is not None:
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def _plan(config: Config, rng: random.Random) -> list[tuple[float, str]]:
    kinds = [kind for kind in FAULT_KINDS for _ in range(config.min_faults)]
    extra = max(0, int(config.duration / config.fault_interval) - len(kinds))
    kinds += [rng.choice(FAULT_KINDS) for _ in range(extra)]
    rng.shuffle(kinds)
    span = config.duration - 2.0
    return sorted((2.0 + span * (i + rng.random()) / len(kinds), k) for i, k in enumerate(kinds))


def run(config: Config, echo: Any = print) -> Outcome:
    """Run the experiment; return what the check found."""
    rng = random.Random(config.seed)
    workdir = Path(config.workdir or tempfile.mkdtemp(prefix="schedule-conservation-"))
    config.workdir = str(workdir)
    server = RedisServer(appendonly=True, appendfsync="always")
    server.start()
    outcome = Outcome()
    try:
        client = server.client()
        store = ScheduleStore(client, NAMESPACE)
        start = store.server_time_ms() // 1000
        for key in SCHEDULES:
            store.set_through(key, start)
        fleet = Fleet(config, server.url, workdir)
        for slot in range(config.schedulers):
            fleet.start(slot)
        echo(f"seeded at {start}; {config.schedulers} schedulers; logs in {workdir}")
        _inject(config, rng, fleet, server, client, outcome, echo)
        fleet.revive()
        outcome.drained = _drain(config, store, fleet)
        fleet.stop()
        _check(client, store, start, fleet.logs, outcome)
        client.close()
    finally:
        server.cleanup()
    return outcome


def _inject(
    config: Config,
    rng: random.Random,
    fleet: Fleet,
    server: RedisServer,
    client: Any,
    outcome: Outcome,
    echo: Any,
) -> None:
    began = time.monotonic()
    waiter = threading.Event()
    paused: list[tuple[float, subprocess.Popen[bytes]]] = []
    for at, kind in _plan(config, rng):
        while time.monotonic() - began < at:
            for until, process in list(paused):
                if time.monotonic() >= until:
                    process.send_signal(signal.SIGCONT)
                    paused.remove((until, process))
            fleet.revive()
            waiter.wait(0.05)
        running = fleet.running()
        if kind == "kill-mid-fire":
            slot = rng.choice(running) if running else 0
            process = fleet.slots[slot]
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
            _kill_mid_fire(fleet, slot, waiter)
        elif kind in ("kill", "pause") and running:
            slot = rng.choice(running)
            process = fleet.slots[slot]
            assert process is not None
            if kind == "pause":
                process.send_signal(signal.SIGSTOP)
                paused.append((time.monotonic() + config.pause_seconds, process))
            else:
                process.kill()
                process.wait()
        elif kind == "fleet-down":
            # Every scheduler down at once: fires come due that nobody decides, and the
            # misfire policy ("all", within its grace) must catch every one up.
            fleet.down_until = time.monotonic() + config.down_seconds
            for process in fleet.slots:
                if process is not None and process.poll() is None:
                    process.send_signal(signal.SIGCONT)
                    process.kill()
                    process.wait()
        elif kind == "redis-restart":
            server.kill()
            server.restart()
        elif kind == "function-flush":
            with contextlib.suppress(Exception):  # Redis restarting: nothing to flush
                client.function_flush()
        outcome.faults[kind] += 1
        echo(f"{time.monotonic() - began:6.1f} s  {kind}")
    for _, process in paused:
        process.send_signal(signal.SIGCONT)


def _kill_mid_fire(fleet: Fleet, slot: int, waiter: threading.Event) -> None:
    """Have a scheduler die between its dispatch claim and its admission.

    Its replacement in ``slot`` SIGKILLs itself right after claiming a fire of
    ``every-1s``; the others are held (SIGSTOP) until it has, so that it is the one to
    decide a fire. They resume with that fire pending, for one of them to finish.
    """
    others = [fleet.slots[i] for i in fleet.running() if i != slot]
    for process in others:
        assert process is not None
        process.send_signal(signal.SIGSTOP)
    fleet.start(slot, kill_mid_fire="every-1s")
    hooked = fleet.slots[slot]
    assert hooked is not None
    deadline = time.monotonic() + 20
    while hooked.poll() is None and time.monotonic() < deadline:
        waiter.wait(0.05)
    for process in others:
        assert process is not None
        process.send_signal(signal.SIGCONT)


def _drain(config: Config, store: ScheduleStore, fleet: Fleet) -> bool:
    """Wait until every schedule has decided and admitted its fires up to now."""
    end = store.server_time_ms() // 1000
    deadline = time.monotonic() + config.drain_timeout
    waiter = threading.Event()
    while time.monotonic() < deadline:
        fleet.revive()
        try:
            snapshot = store.snapshot()
        except Exception:
            waiter.wait(0.2)
            continue
        if all(snapshot.through.get(k, 0) >= end for k in SCHEDULES) and not any(
            snapshot.pending.get(k) for k in SCHEDULES
        ):
            return True
        waiter.wait(0.2)
    return False


def _check(
    client: Any, store: ScheduleStore, start: int, logs: list[Path], outcome: Outcome
) -> None:
    snapshot = store.snapshot()
    outcome.pending_left = sum(len(snapshot.pending.get(k, {})) for k in SCHEDULES)
    records_key = "{%s:default}:records" % NAMESPACE  # noqa: UP031 - the hash tag
    stored = {k.decode() for k in client.hkeys(records_key)}
    registry = RedisDispatchRegistry(client, namespace="kaal")
    told: Counter[str] = Counter()
    outcome.mid_fire_kills = 0
    for log in logs:
        text = log.read_text(errors="replace")
        outcome.mid_fire_kills += text.count("kill-after-claim ")
        told.update(f"schedule:{key}:{epoch}" for key, epoch in ADMITTED.findall(text))
    for key, timing in TIMINGS.items():
        due, at = [], start
        while (fire := timing.next_after(at)) is not None and fire <= snapshot.through[key]:
            due.append(fire)
            at = fire
        expected = {f"schedule:{key}:{fire}" for fire in due}
        mine = {rid for rid in stored if rid.startswith(f"schedule:{key}:")}
        outcome.due[key] = len(expected)
        outcome.admitted[key] = len(mine & expected)
        outcome.lost += sorted(expected - mine)
        outcome.extra += sorted(mine - expected)
        for fire in due:
            dispatch = registry.find_dispatch(key, fire)
            if dispatch is None:
                outcome.undispatched.append(f"schedule:{key}:{fire}")
            else:
                outcome.statuses[dispatch.status] += 1
    outcome.twice = sorted(rid for rid, count in told.items() if count > 1)


def parse(argv: list[str]) -> Config:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--schedulers", type=int, default=3, help="processes (default 3)")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of faults")
    parser.add_argument("--fault-interval", type=float, default=3.0, help="mean seconds apart")
    parser.add_argument("--seed", type=int, default=20_240_601)
    parser.add_argument("--workdir", default="", help="where the logs go (default: a temp dir)")
    options = parser.parse_args(argv)
    return Config(
        schedulers=options.schedulers,
        duration=options.duration,
        fault_interval=options.fault_interval,
        seed=options.seed,
        workdir=options.workdir,
    )


def main(argv: list[str]) -> int:
    config = parse(argv)
    began = time.monotonic()
    outcome = run(config, echo=lambda line: print(line, flush=True))
    print(outcome.table)
    print(f"wall time {time.monotonic() - began:.0f} s; logs in {config.workdir}")
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
