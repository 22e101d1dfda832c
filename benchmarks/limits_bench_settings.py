"""Settings for the worker processes of ``benchmarks/limits_bench.py``: three raw queues
with a no-op handler, none limited in the settings (the bench stores their limits)."""

from testproject.settings import *  # noqa: F403
from testproject.settings import LEDGER

_NOOP = {"HANDLER": "tests.support.bench_handlers.noop", "MAX_RECORDS": 10_000_000}

LEDGER = {
    **LEDGER,
    "QUEUES": {**LEDGER["QUEUES"], "plain": _NOOP, "limited": _NOOP, "keyed": _NOOP},
}
