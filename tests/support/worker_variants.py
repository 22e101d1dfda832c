"""``ledger_worker`` processes started unlike ``tests.support.worker_process``'s default.

``VariantWorker`` takes another settings module, extra environment, and module names
to make unimportable in the child (a meta path finder installed before anything else
imports), to show how the worker behaves without an optional extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from tests.support.worker_process import ROOT, WorkerProcess

#: Python run with ``-c``: block the modules of ``LEDGER_TEST_BLOCK``, then run manage.py.
LAUNCH = """
import os, runpy, sys

blocked = {name for name in os.environ.get("LEDGER_TEST_BLOCK", "").split(",") if name}


class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


sys.meta_path.insert(0, Blocked())
sys.argv = ["manage.py", *sys.argv[1:]]
runpy.run_path("manage.py", run_name="__main__")
"""


class VariantWorker(WorkerProcess):
    """One ``ledger_worker`` subprocess with its own settings, environment and blocks."""

    def __init__(
        self,
        redis_url: str,
        namespace: str,
        args: list[str],
        log: Path,
        *,
        settings: str = "tests.support.worker_settings",
        block: Iterable[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        environment = {
            **os.environ,
            **(env or {}),
            "REDIS_URL": redis_url,
            "LEDGER_NAMESPACE": namespace,
            "DJANGO_SETTINGS_MODULE": settings,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "LEDGER_TEST_BLOCK": ",".join(block),
        }
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, "ledger_worker", *args],
            cwd=ROOT,
            env=environment,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )
