"""Deadlines come from the Redis server clock: a client an hour off changes nothing.

The same scenario runs in subprocesses whose clocks (``time.time``, ``time.time_ns``
and ``datetime.now``) are shifted an hour back, not at all, and an hour ahead, by a
``sitecustomize`` loaded before anything else; every answer must be the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from django_ledger import Ledger, State
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3600

SITECUSTOMIZE = textwrap.dedent(
    """
    import datetime as _datetime
    import os
    import time

    _SHIFT = float(os.environ["LEDGER_TEST_CLOCK_SHIFT"])
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _SHIFT
    time.time_ns = lambda: _time_ns() + int(_SHIFT * 1_000_000_000)


    class _ShiftedDatetime(_datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return super().now(tz) + _datetime.timedelta(seconds=_SHIFT)

        @classmethod
        def utcnow(cls):
            return super().utcnow() + _datetime.timedelta(seconds=_SHIFT)

        @classmethod
        def today(cls):
            return cls.now()


    _datetime.datetime = _ShiftedDatetime
    """
)


def scenario(url: str, namespace: str, prefix: str) -> dict[str, Any]:
    """Admit, claim, renew, settle and repair, reporting only what the clock decides."""
    from datetime import datetime  # as the process sees it (shifted or not)

    client = redis.Redis.from_url(url)
    out: dict[str, Any] = {}
    try:
        for optimized in (True, False):
            ledger = Ledger(client, namespace, f"{prefix}-{optimized}", optimized=optimized)
            server = ledger.server_time_ms()
            steps: list[Any] = []
            admissions = [
                ledger.admit("now", "p"),
                ledger.admit("soon", "p", delay=60),
                ledger.admit("later", "p", delay=timedelta(minutes=30)),
            ]
            records = [a.record for a in admissions if a.record is not None]
            steps.append(
                [
                    (a.status.value, r.due_at - r.created_at)
                    for a, r in zip(admissions, records, strict=True)
                ]
            )
            steps.append(all(abs(r.created_at - server) < 60_000 for r in records))

            # A client an hour ahead would think everything due: only "now" is.
            claims = ledger.claim_many("w", 10, lease=30)
            steps.append(
                [(c.request_id, c.lease_until - updated_at(ledger, c.request_id)) for c in claims]
            )
            started = updated_at(ledger, claims[0].request_id)
            renewal = ledger.renew(claims[0], lease=45)
            assert renewal.record is not None and renewal.record.lease_until is not None
            # A renewal keeps updated_at (the attempt's start): the new lease runs 45 s
            # from the renewal, a few milliseconds after the claim.
            kept = renewal.record.updated_at == started
            ran = renewal.record.lease_until - renewal.record.updated_at
            steps.append((renewal.status.value, kept, 45_000 <= ran < 55_000))
            retry = ledger.settle(claims[0], State.PENDING, delay=120)
            assert retry.record is not None
            steps.append((retry.status.value, retry.record.due_at - retry.record.updated_at))

            ledger.clock_skew_ms += 61_000
            soon = ledger.claim_many("w", 10, lease=10)
            steps.append([c.request_id for c in soon])
            ledger.clock_skew_ms += 31_000
            lost = ledger.settle(soon[0])
            steps.append((lost.status.value, lost.reason, ledger.stats().expired_leases))
            report = ledger.repair_page("0", 100)
            steps.append(report.counts())
            back = ledger.resolve("soon")
            assert back is not None
            steps.append((back.state.value, back.due_at - back.updated_at))

            ledger.clock_skew_ms += 30 * 60_000
            rest = ledger.claim_many("w", 10)
            steps.append([c.request_id for c in rest])
            steps.append(
                [s.status.value for s in ledger.settle_many([(c, State.COMPLETED) for c in rest])]
            )
            stats = ledger.stats().as_dict()
            del stats["oldest_due_age_ms"]
            steps.append(stats)
            out["optimized" if optimized else "reference"] = steps
        out["client_minus_server_s"] = round(
            time.time() - ledger.server_time_ms() / 1000 + ledger.clock_skew_ms / 1000
        )
        out["datetime_minus_server_s"] = round(
            datetime.now().timestamp() - (ledger.server_time_ms() - ledger.clock_skew_ms) / 1000
        )
    finally:
        client.close()
    return out


def updated_at(ledger: Ledger, request_id: str) -> int:
    """The server instant of the record's last write."""
    record = ledger.resolve(request_id)
    assert record is not None
    return record.updated_at


def start_shifted(tmp_path: Path, url: str, namespace: str, shift: int) -> subprocess.Popen[str]:
    """Start the scenario in a Python whose clock is ``shift`` seconds off."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    hook = site / "sitecustomize.py"
    if not hook.exists():  # rewriting it could race a process already starting on it
        hook.write_text(SITECUSTOMIZE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "LEDGER_TEST_CLOCK_SHIFT": str(shift),
    }
    code = (
        "import json, sys\n"
        "from tests.core.test_server_clock import scenario\n"
        "print(json.dumps(scenario(*sys.argv[1:])))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, url, namespace, f"shift{shift}"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def result_of(process: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        stdout, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    assert process.returncode == 0, stderr
    result: dict[str, Any] = json.loads(stdout)
    return result


EXPECTED_STEPS = [
    [["ADMITTED", 0], ["ADMITTED", 60_000], ["ADMITTED", 1_800_000]],
    True,
    [["now", 30_000]],
    ["RENEWED", True, True],
    ["SETTLED", 120_000],
    ["soon"],
    ["LOST", "lease_expired", 1],
    {
        "scanned": 3,
        "reindexed": 0,
        "expired": 1,
        "dead": 0,
        "quarantined": 0,
        "purged": 0,
        "stale": 0,
    },
    ["PENDING", 0],
    ["soon", "now", "later"],
    ["SETTLED", "SETTLED", "SETTLED"],
    {
        "pending_due": 0,
        "pending_later": 0,
        "claimed": 0,
        "expired_leases": 0,
        "completed": 3,
        "failed": 0,
        "dead": 0,
        "quarantined": 0,
        "total": 3,
        "gate_closed": False,
    },
]


def test_a_client_an_hour_off_gets_the_same_results(
    tmp_path: Path, redis_server: RedisServer, namespace: str
) -> None:
    processes = {
        shift: start_shifted(tmp_path, redis_server.url, namespace, shift)
        for shift in (-HOUR, 0, HOUR)
    }
    results = {shift: result_of(process) for shift, process in processes.items()}
    for shift, result in results.items():
        # The shift took hold in the subprocess, for time and datetime alike ...
        assert abs(result.pop("client_minus_server_s") - shift) <= 5
        assert abs(result.pop("datetime_minus_server_s") - shift) <= 5
        # ... and changed nothing the ledger answered, in either mode.
        assert result == {"optimized": EXPECTED_STEPS, "reference": EXPECTED_STEPS}, shift


@pytest.mark.parametrize("shift", [-HOUR, HOUR])
def test_a_shifted_time_time_in_process_changes_nothing(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch, shift: int
) -> None:
    real_time, real_time_ns = time.time, time.time_ns
    monkeypatch.setattr(time, "time", lambda: real_time() + shift)
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + shift * 1_000_000_000)
    result = scenario(redis_server.url, namespace, f"inprocess{shift}")
    assert abs(result.pop("client_minus_server_s") - shift) <= 5
    result.pop("datetime_minus_server_s")
    assert json.loads(json.dumps(result)) == {
        "optimized": EXPECTED_STEPS,
        "reference": EXPECTED_STEPS,
    }
