"""One conservation run, start to verdict.

Starts a Redis with AOF (``appendfsync always``) on a free port, the fault proxy in
front of it, a repair loop, the workers and the producers; injects the scheduled
faults; waits for the queue to drain; stops everything; checks every identity.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from django_ledger import Ledger
from tests.support.harness.checker import check
from tests.support.harness.config import Config
from tests.support.harness.faults import Injector, schedule
from tests.support.harness.fleet import Fleet
from tests.support.harness.logs import read_logs
from tests.support.harness.proxy import FaultProxy
from tests.support.harness.report import Outcome
from tests.support.redis_server import RedisServer

__all__ = ["run"]


def run(config: Config, echo: Callable[[str], None] = lambda line: None) -> Outcome:
    """Run the experiment ``config`` describes and return its outcome (never raises on a FAIL)."""
    if not config.workdir:
        config.workdir = tempfile.mkdtemp(prefix="ledger-conservation-")
    config.path("logs").mkdir(parents=True, exist_ok=True)
    rng = random.Random(config.seed)
    server = RedisServer(appendonly=True, appendfsync="always")
    server.start()
    proxy = FaultProxy(server.port).start()
    config.url = proxy.url
    fleet = Fleet(config, config.save())
    injector = Injector(config, server, proxy, fleet, rng)
    echo(
        f"redis on port {server.port} (AOF, appendfsync always), proxy on {proxy.port}, logs in {config.workdir}"
    )
    try:
        fleet.add("repairer", 1)
        fleet.add("worker", config.workers)
        started = time.monotonic()
        fleet.add("producer", config.producers)
        for at, kind in schedule(config, rng):
            _wait_until(started + at, fleet)
            injector.do(kind)
            echo(f"{time.monotonic() - started:6.1f} s  {kind}")
        while injector.pausing:
            _wait_until(time.monotonic() + 0.1, fleet)
        faults_over = max(time.monotonic(), proxy.quiet_at)
        drained = _drain(config, server, fleet, faults_over, faults_over + config.drain_timeout)
        done = time.monotonic()
        echo(f"{done - started:6.1f} s  {'drained' if drained else 'NOT drained'}")
        fleet.stop(("producer", "worker", "repairer"))
        logs = read_logs(config.path("logs"))
        client = server.client(socket_timeout=60)
        try:
            findings = check(config, client, logs, injector.garbage)
        finally:
            client.close()
        killed = {f"worker-{m.index}-{i}" for m in fleet.of("worker") for i in m.killed}
        return Outcome(
            config=config,
            faults=injector.counts,
            garbage=set(injector.garbage),
            logs=logs,
            findings=findings,
            drain_seconds=done - started,
            drain_after_faults=max(0.0, done - faults_over),
            drained=drained,
            crashes=_crashes(config, fleet),
            mid_lease_kills=len(killed & logs.ended_holding),
        )
    finally:
        injector.resume_all()
        fleet.kill_all()
        proxy.stop()
        server.stop()
        server.cleanup()


def _wait_until(moment: float, fleet: Fleet) -> None:
    while time.monotonic() < moment:
        fleet.watch()
        time.sleep(min(0.05, max(0.0, moment - time.monotonic())))
    fleet.watch()


def _drain(
    config: Config, server: RedisServer, fleet: Fleet, not_before: float, deadline: float
) -> bool:
    """Wait until the faults are over, producers are done and nothing is pending or
    claimed, even after a repair cycle."""
    client = server.client(socket_timeout=30)
    ledger = Ledger(client, config.namespace, config.queue, **config.ledger_kwargs())
    try:
        while time.monotonic() < deadline:
            fleet.watch()
            quiet = time.monotonic() >= not_before
            if quiet and fleet.producers_done() and _idle(ledger):
                # The indexes say so: make sure the records agree before believing it.
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


def _crashes(config: Config, fleet: Fleet) -> list[str]:
    found = []
    for member in fleet.members:
        for incarnation, code in member.crashed:
            name = f"{member.role}-{member.index}-{incarnation}"
            errors = Path(config.path("logs", f"{name}.stderr"))
            tail = (
                errors.read_text(errors="replace").strip().splitlines()[-3:]
                if errors.exists()
                else []
            )
            found.append(f"CRASH {name} exited with {code}: {' | '.join(tail)}")
    return found
