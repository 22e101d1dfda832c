"""Conservation through real workers: ``ledger_worker`` processes drain N identities
while workers are SIGKILLed and SIGTERMed, Redis is SIGKILLed and restarted from its
AOF, and the ledger's functions are flushed; then every identity is checked.

The short run is ``tests/worker/test_worker_conservation.py``, the long one
``benchmarks/worker_conservation.py``; ``docs/reliability.md`` has the figures.

* Redis: a private redis-server on a free port, AOF with ``appendfsync always``.
* Producers: the harness's (``tests/support/harness/producer.py``), straight to Redis, pacing
  their admissions (with duplicates, conflicts and ids two producers race on) and
  logging every acknowledged one.
* Workers: ``WorkerFleet`` slots of ``manage.py ledger_worker conserve`` (defaults but
  ``--worker-id``), each run of ``tests.support.bench_handlers.record_run`` logged outside Redis.
* Faults, at random moments, each kind at least its minimum: ``worker_kill`` (SIGKILL a
  worker while it has a run in flight, start another), ``worker_term`` (SIGTERM one,
  wait for its clean stop, start another), ``redis_kill`` (SIGKILL Redis, restart it
  from its AOF on the same port), ``function_flush``.

The check (``check_runs``): the harness's checker over the records, indexes, stats and
the producers' and workers' logs; then, per identity: COMPLETED in the ledger (else
*lost*), completed by one claim only (else *ended twice*), and every run but the last
explained: a lower fence than the last, never settled, and its lease ended, because
its worker was SIGKILLed, or because the ledger answered that worker LOST (Redis was
away past the lease), or because its worker stopped without settling it.
"""

from __future__ import annotations

import random
import re
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import redis

from django_ledger import Ledger, State
from tests.support.harness.checker import Findings, check
from tests.support.harness.config import Config
from tests.support.harness.fleet import Fleet
from tests.support.harness.logs import AgentLogs, read_logs
from tests.support.harness.worker_fleet import Incarnation, WorkerFleet
from tests.support.redis_server import RedisServer

__all__ = ["WORKER_FAULTS", "WorkerOutcome", "WorkerRun", "check_runs", "run_workers"]

#: The faults of this run, in the order the table lists them.
WORKER_FAULTS = ("worker_kill", "worker_term", "redis_kill", "function_flush")

_LABELS = {
    "worker_kill": "worker SIGKILL mid-run (restarted)",
    "worker_term": "worker SIGTERM (restarted)",
    "redis_kill": "Redis SIGKILL (restarted from AOF)",
    "function_flush": "FUNCTION FLUSH",
}


@dataclass
class WorkerRun:
    """What one run does."""

    identities: int = 3_000
    workers: int = 3
    concurrency: int = 8
    producers: int = 2
    #: Seconds during which faults land; admissions are paced over ``admit_seconds``.
    duration: float = 16.0
    admit_seconds: float | None = None
    #: Each run sleeps a random time up to this long (so that runs are in flight).
    work_seconds: float = 0.04
    min_faults: dict[str, int] = field(default_factory=lambda: dict.fromkeys(WORKER_FAULTS, 2))
    #: Mean seconds between faults (more than the minimum on long runs).
    fault_interval: float = 2.0
    seed: int = 20_240_601
    drain_timeout: float = 120.0
    workdir: str = ""
    namespace: str = "wconservation"
    #: The queue of ``tests.support.bench_settings`` (2 s lease, 16 attempts, 30 days retention).
    queue: str = "conserve"

    def harness_config(self) -> Config:
        return Config(
            identities=self.identities,
            workers=self.workers,
            producers=self.producers,
            duration=self.duration,
            admit_seconds=self.admit_seconds
            if self.admit_seconds is not None
            else self.duration * 0.75,
            seed=self.seed,
            namespace=self.namespace,
            queue=self.queue,
            max_attempts=16,
            retention_days=30.0,
            lease_seconds=2.0,
            drain_timeout=self.drain_timeout,
            workdir=self.workdir,
            clock_skew_hours=0.0,
        )


@dataclass
class Fault:
    at: float
    kind: str
    detail: str = ""
    worker: str = ""
    #: For a kill: whether it came while the worker had a run in flight.
    mid_run: bool = False


@dataclass
class RunFindings:
    """What ``check_runs`` found beyond the harness's checker."""

    admitted: int = 0
    completed: int = 0
    lost: set[str] = field(default_factory=set)
    ended_twice: set[str] = field(default_factory=set)
    runs: int = 0
    settled: Counter[str] = field(default_factory=Counter)
    ran_again: int = 0
    extra_runs: int = 0
    explained: Counter[str] = field(default_factory=Counter)
    unexplained: list[str] = field(default_factory=list)
    cut_runs: int = 0
    #: COMPLETED with no outcome line: the worker was killed between settling and logging.
    unlogged: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class WorkerOutcome:
    run: WorkerRun
    faults: list[Fault]
    harness: Findings
    findings: RunFindings
    drained: bool
    drain_seconds: float
    drain_after_faults: float
    crashes: list[str]
    incarnations: int

    @property
    def lost(self) -> int:
        return len(self.findings.lost | self.harness.lost)

    @property
    def ended_twice(self) -> int:
        return len(self.findings.ended_twice | self.harness.duplicated)

    @property
    def passed(self) -> bool:
        return (
            self.drained
            and self.lost == 0
            and self.ended_twice == 0
            and not self.findings.unexplained
            and not self.findings.problems
            and self.harness.passed
            and not self.crashes
        )

    def count(self, kind: str) -> int:
        return sum(1 for fault in self.faults if fault.kind == kind)

    @property
    def table(self) -> str:
        return render(self)


# -- the run ------------------------------------------------------------------------------


def schedule(run: WorkerRun, rng: random.Random) -> list[tuple[float, str]]:
    """(seconds after the start, kind) for every fault, in time order."""
    kinds = [kind for kind in WORKER_FAULTS for _ in range(run.min_faults.get(kind, 0))]
    start = min(2.0, run.duration / 8)
    span = max(run.duration - start, 0.1)
    extra = int(span / run.fault_interval) - len(kinds)
    kinds += [rng.choice(WORKER_FAULTS) for _ in range(max(0, extra))]
    rng.shuffle(kinds)
    step = span / max(len(kinds), 1)
    return [(start + step * (i + rng.random() * 0.5), kind) for i, kind in enumerate(kinds)]


def run_workers(run: WorkerRun, echo: Callable[[str], None] = lambda line: None) -> WorkerOutcome:
    """Run the experiment and return its outcome (a FAIL is an outcome, not an error)."""
    if not run.workdir:
        run.workdir = tempfile.mkdtemp(prefix="ledger-worker-conservation-")
    config = run.harness_config()
    config.path("logs").mkdir(parents=True, exist_ok=True)
    rng = random.Random(run.seed)
    server = RedisServer(appendonly=True, appendfsync="always")
    server.start()
    config.url = server.url
    producers = Fleet(config, config.save())
    workers = WorkerFleet(
        Path(run.workdir),
        server.url,
        run.namespace,
        run.queue,
        run.workers,
        concurrency=run.concurrency,
        work_seconds=run.work_seconds,
    )
    echo(f"redis on port {server.port} (AOF, appendfsync always), logs in {run.workdir}")
    faults: list[Fault] = []
    try:
        workers.start()
        _wait_started(workers, deadline=time.monotonic() + 90)
        started = time.monotonic()
        producers.add("producer", run.producers)
        for at, kind in schedule(run, rng):
            _wait_until(started + at, producers, workers)
            fault = _inject(kind, server, workers, rng)
            fault.at = time.monotonic() - started
            faults.append(fault)
            echo(f"{fault.at:6.1f} s  {kind} {fault.worker} {fault.detail}".rstrip())
        faults_over = time.monotonic()
        drained = _drain(config, server, producers, workers, faults_over + run.drain_timeout)
        done = time.monotonic()
        echo(f"{done - started:6.1f} s  {'drained' if drained else 'NOT drained'}")
        workers.stop()
        producers.stop(("producer",))
        client = server.client(socket_timeout=60)
        try:
            harness, findings = check_runs(config, client, workers)
        finally:
            client.close()
        crashes = [
            f"CRASH {i.worker_id} exited with {i.exit_code}"
            for i in workers.history
            if i.ended_by == "crash"
            or (i.ended_by == "term" and i.exit_code != 0)
            # At the end, one that had just been restarted may still be starting.
            or (i.ended_by == "stop" and i.exit_code not in (0, -15))
        ]
        for member in producers.of("producer"):
            crashes += [f"CRASH producer-{member.index} exited with {c}" for _, c in member.crashed]
        return WorkerOutcome(
            run=run,
            faults=faults,
            harness=harness,
            findings=findings,
            drained=drained,
            drain_seconds=done - started,
            drain_after_faults=done - faults_over,
            crashes=crashes,
            incarnations=len(workers.history),
        )
    finally:
        workers.kill_all()
        producers.kill_all()
        server.stop()
        server.cleanup()


def _wait_started(workers: WorkerFleet, deadline: float) -> None:
    """Wait until every worker says it started (Django's start-up takes a while)."""
    while time.monotonic() < deadline:
        workers.watch()
        if all(workers.started(i) for i in workers.current.values()):
            return
        time.sleep(0.05)
    raise RuntimeError(f"the workers did not start; see {workers.out_dir}")


def _wait_until(moment: float, producers: Fleet, workers: WorkerFleet) -> None:
    while time.monotonic() < moment:
        producers.watch()
        workers.watch()
        time.sleep(min(0.05, max(0.0, moment - time.monotonic())))


def _inject(kind: str, server: RedisServer, workers: WorkerFleet, rng: random.Random) -> Fault:
    fault = Fault(0.0, kind)
    if kind == "worker_kill":
        slot = rng.randrange(workers.count)
        fault.mid_run = workers.wait_mid_run(slot)
        dead = workers.kill(slot)
        fault.worker = dead.worker_id
        fault.detail = f"({workers.in_flight(dead)} run(s) in flight)"
    elif kind == "worker_term":
        slot = rng.randrange(workers.count)
        workers.wait_started(slot)
        stopped = workers.terminate(slot)
        fault.worker = stopped.worker_id
        fault.detail = f"(exit {stopped.exit_code})"
    elif kind == "redis_kill":
        down = time.monotonic()
        server.kill()
        time.sleep(0.3 + rng.random())
        server.restart()
        client = server.client(socket_timeout=5)
        try:
            while client.info("persistence").get("loading"):
                time.sleep(0.05)
        finally:
            client.close()
        fault.detail = f"(down {time.monotonic() - down:.1f} s)"
    elif kind == "function_flush":
        client = server.client(socket_timeout=5)
        try:
            client.function_flush()
        finally:
            client.close()
    else:
        raise ValueError(f"unknown fault {kind!r}")
    return fault


def _drain(
    config: Config, server: RedisServer, producers: Fleet, workers: WorkerFleet, deadline: float
) -> bool:
    """Wait until the producers are done and nothing is PENDING or CLAIMED."""
    client = server.client(socket_timeout=30)
    ledger = Ledger(client, config.namespace, config.queue, **config.ledger_kwargs())
    try:
        while time.monotonic() < deadline:
            producers.watch()
            workers.watch()
            if producers.producers_done() and _idle(ledger):
                for _ in ledger.repair_cycle(1000):
                    pass
                if _idle(ledger):
                    return True
            time.sleep(0.2)
        return False
    finally:
        client.close()


def _idle(ledger: Ledger) -> bool:
    stats = ledger.stats()
    return stats.pending == 0 and stats.claimed == 0


# -- the check ----------------------------------------------------------------------------

_OUTCOME = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ outcome=(\w+) queue=\S+ (?:task=\S+ )?"
    r"id=(\S+) attempt=(\d+) fence=(\d+)"
)
_RENEWAL_LOST = re.compile(r"renewal of (\S+) \(queue \S+, fence (\d+)\) answered LOST")
_LEFT = re.compile(r"job\(s\) still running after .* leaving them to their leases")


@dataclass
class _Run:
    fence: int
    attempt: int
    worker: str
    began: float
    ended: bool = False


def _read_runs(folder: Path) -> dict[str, list[_Run]]:
    runs: dict[str, list[_Run]] = defaultdict(list)
    for path in sorted(folder.glob("runs-*.log")):
        open_runs: dict[tuple[str, int], _Run] = {}
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split("\t")
            if parts[0] == "B" and len(parts) == 6:
                run = _Run(int(parts[2]), int(parts[3]), parts[4], float(parts[5]))
                runs[parts[1]].append(run)
                open_runs[(parts[1], run.fence)] = run
            elif parts[0] == "E" and len(parts) == 3:
                began = open_runs.get((parts[1], int(parts[2])))
                if began is not None:
                    began.ended = True
    return runs


def _epoch_ms(stamp: str) -> int:
    moment = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
    return int(moment.timestamp() * 1000)


def check_runs(
    config: Config, client: redis.Redis, workers: WorkerFleet
) -> tuple[Findings, RunFindings]:
    """Check a finished run: the harness's rules, then every identity's runs."""
    found = RunFindings()
    logs: AgentLogs = read_logs(config.path("logs"))  # the producers'
    runs = _read_runs(workers.runs_dir)
    completions: dict[str, dict[int, str]] = defaultdict(dict)
    answered_lost: set[tuple[str, int]] = set()
    left_to_lease: set[str] = set()
    for path in sorted(workers.out_dir.glob("*.out")):
        worker = path.stem
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            outcome = _OUTCOME.match(line)
            if outcome is not None:
                stamp, word, request, _, fence = outcome.groups()
                found.settled[word] += 1
                if word == "completed":
                    if int(fence) not in completions[request]:
                        logs.accepted[request].append(
                            (int(fence), "COMPLETED", worker, _epoch_ms(stamp))
                        )
                    completions[request][int(fence)] = worker
                elif word == "lost":
                    answered_lost.add((request, int(fence)))
                else:
                    found.problems.append(f"{request}: a no-op run settled {word} ({line})")
                continue
            renewal = _RENEWAL_LOST.search(line)
            if renewal is not None:
                answered_lost.add((renewal.group(1), int(renewal.group(2))))
            elif _LEFT.search(line):
                left_to_lease.add(worker)
    for request, attempts in runs.items():
        for run in attempts:
            logs.grants[request].append((run.fence, run.worker))
            if run.ended:
                logs.intents[request].add((run.fence, "COMPLETED"))
    harness = check(config, client, logs, garbage=set())

    ended_by = {i.worker_id: i for i in workers.history}
    ledger = Ledger(client, config.namespace, config.queue, **config.ledger_kwargs())
    acknowledged = sorted(logs.acknowledged)
    found.admitted = len(acknowledged)
    records = {}
    for start in range(0, len(acknowledged), 1000):
        chunk = acknowledged[start : start + 1000]
        records.update(zip(chunk, ledger.resolve_many(chunk), strict=True))
    for request in acknowledged:
        record = records[request]
        if record is None or record.state is not State.COMPLETED:
            found.lost.add(request)
            state = "no record" if record is None else record.state.value
            found.problems.append(f"LOST {request}: {state} at the end")
            continue
        found.completed += 1
        if not completions.get(request):
            found.unlogged += 1  # settled, then its worker was killed before it said so
        if len(completions.get(request, {})) > 1:
            found.ended_twice.add(request)
            found.problems.append(
                f"ENDED TWICE {request}: completed at fences {sorted(completions[request])}"
            )
        attempts = sorted(runs.get(request, []), key=lambda run: run.fence)
        found.runs += len(attempts)
        if not attempts or attempts[-1].fence != record.fence:
            found.problems.append(
                f"{request}: COMPLETED at fence {record.fence}, last run at "
                f"{attempts[-1].fence if attempts else 'none'}"
            )
            continue
        if len(attempts) > 1:
            found.ran_again += 1
            found.extra_runs += len(attempts) - 1
        for earlier in attempts[:-1]:
            why = _explain(request, earlier, completions, answered_lost, left_to_lease, ended_by)
            if why.startswith("UNEXPLAINED"):
                found.unexplained.append(f"{request} fence {earlier.fence}: {why}")
            else:
                found.explained[why] += 1
    for incarnation in workers.history:
        if incarnation.ended_by == "kill":
            found.cut_runs += workers.in_flight(incarnation)
    # Identities never acknowledged are the harness checker's to report (wrong states).
    return harness, found


def _explain(
    request: str,
    earlier: _Run,
    completions: dict[str, dict[int, str]],
    answered_lost: set[tuple[str, int]],
    left_to_lease: set[str],
    ended_by: dict[str, Incarnation],
) -> str:
    """Say why an earlier run of ``request`` did not end it: whose lease ended, and how."""
    if earlier.fence in completions.get(request, {}):
        return "UNEXPLAINED: an earlier run was settled COMPLETED too"
    # The worker's own word about this very run comes first; then how its worker ended.
    if (request, earlier.fence) in answered_lost:
        return "the ledger answered its worker LOST (lease ended)"
    incarnation = ended_by.get(earlier.worker)
    if incarnation is not None and incarnation.ended_by == "kill":
        return "its worker was SIGKILLed"
    if earlier.worker in left_to_lease:
        return "its worker stopped and left it to its lease"
    if incarnation is not None and incarnation.ended_by == "crash":
        return "its worker crashed"
    return "UNEXPLAINED: never settled, its worker lived and was not answered LOST"


# -- the table ----------------------------------------------------------------------------


def render(outcome: WorkerOutcome) -> str:
    run, found, harness = outcome.run, outcome.findings, outcome.harness
    kills = [f for f in outcome.faults if f.kind == "worker_kill"]
    downs = [
        float(f.detail.split()[1]) for f in outcome.faults if f.kind == "redis_kill" and f.detail
    ]
    rows: list[tuple[str, str]] = [
        ("identities admitted (acknowledged)", f"{found.admitted:,} of {run.identities:,}"),
        (
            "ledger_worker processes / producers",
            f"{run.workers} x concurrency {run.concurrency} / {run.producers}",
        ),
        ("worker processes started in all", f"{outcome.incarnations}"),
        ("faults injected", f"{len(outcome.faults)}"),
    ]
    for kind in WORKER_FAULTS:
        count = outcome.count(kind)
        if kind == "worker_kill":
            mid = sum(1 for f in kills if f.mid_run)
            value = f"{count} ({mid} mid-run, {found.cut_runs} runs cut short)"
        elif kind == "redis_kill" and downs:
            value = f"{count} (down {min(downs):.1f} to {max(downs):.1f} s)"
        else:
            value = str(count)
        rows.append((f"  {_LABELS[kind]}", value))
    rows += [
        ("runs of the handler", f"{found.runs:,}"),
        (
            "settlements answered",
            ", ".join(f"{k} {v:,}" for k, v in sorted(found.settled.items())) or "0",
        ),
        ("  COMPLETED, not logged (worker killed first)", f"{found.unlogged:,}"),
        (
            "final states",
            ", ".join(f"{k} {v:,}" for k, v in sorted(harness.final_states.items())),
        ),
        ("lost", f"{outcome.lost:,}"),
        ("ended twice", f"{outcome.ended_twice:,}"),
        (
            "ran more than once",
            f"{found.ran_again:,} identities, {found.extra_runs:,} extra runs",
        ),
    ]
    for why, count in sorted(found.explained.items()):
        rows.append((f"  {why}", f"{count:,}"))
    rows += [
        ("  unexplained", f"{len(found.unexplained):,}"),
        ("other checks (harness checker)", f"{len(harness.wrong):,} wrong"),
        (
            "time to drain",
            f"{outcome.drain_seconds:.1f} s ({outcome.drain_after_faults:.1f} s after the last fault)"
            + ("" if outcome.drained else " NOT DRAINED"),
        ),
        ("verdict", "PASS" if outcome.passed else "FAIL"),
    ]
    width = max(len(label) for label, _ in rows)
    vwidth = max(len(value) for _, value in rows)
    rule = f"+-{'-' * width}-+-{'-' * vwidth}-+"
    lines = [rule] + [f"| {label:<{width}} | {value:>{vwidth}} |" for label, value in rows] + [rule]
    shown = outcome.crashes + found.problems + found.unexplained + harness.problems
    if shown:
        lines.append(f"{len(shown)} problem(s), the first 20:")
        lines += [f"  {line}" for line in shown[:20]]
    return "\n".join(lines)
