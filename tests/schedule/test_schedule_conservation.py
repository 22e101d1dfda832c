"""The short run of the schedules' proof of conservation (the long one:
``benchmarks/schedule_conservation.py``).

Three ``ledger_scheduler`` processes and three schedules (every second, every 3 s, and a
six-field cron in Europe/Paris) against a Redis with AOF, for 30 s of faults, every kind
at least twice: schedulers SIGKILLed (some between their dispatch claim and their
admission, and all of them at once for 4 s), SIGSTOPped past their fire lease, Redis SIGKILLed and restarted, the script
cache flushed. Then every fire of the run is checked: admitted once, none lost, none
extra, each with its dispatch record.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.schedule_conservation import FAULT_KINDS, Config, run


def test_every_fire_due_is_admitted_once_whatever_fails(tmp_path: Path) -> None:
    config = Config(schedulers=3, duration=30.0, fault_interval=2.0, workdir=str(tmp_path))

    outcome = run(config, echo=print)

    print(outcome.table)
    assert all(outcome.faults[kind] >= 2 for kind in FAULT_KINDS), outcome.faults
    assert outcome.mid_fire_kills >= 1, "no scheduler died between claim and admission"
    assert outcome.drained, "the schedulers did not catch up"
    assert sum(outcome.due.values()) >= 40
    assert outcome.lost == []
    assert outcome.extra == []
    assert outcome.twice == []
    assert outcome.undispatched == []
    assert outcome.pending_left == 0
    assert outcome.passed
