"""The proof of conservation: a harness that runs the ledger under faults and checks it.

Usable as a library by a short CI test (``tests/core/test_conservation.py``) and by the
long run by hand (``benchmarks/conservation.py``)::

    from tests.support.harness import Config, run

    outcome = run(Config(identities=10_000, workers=4))
    print(outcome.table)
    assert outcome.passed

Modules: ``config`` (what a run does), ``proxy`` (the fault proxy), ``agent`` with
``producer``, ``worker`` and ``repairer`` (the processes), ``fleet`` (starting and
killing them), ``faults`` (the injector), ``logs`` and ``checker`` (the check),
``report`` (the table), ``experiment`` (one run, start to verdict). See
``docs/reliability.md``.
"""

from tests.support.harness.config import FAULT_KINDS, Config
from tests.support.harness.experiment import run
from tests.support.harness.report import Outcome

__all__ = ["FAULT_KINDS", "Config", "Outcome", "run"]
