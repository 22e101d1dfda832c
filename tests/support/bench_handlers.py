"""Raw handlers of ``tests.support.bench_settings``: the worker benchmark's and the worker
conservation run's (``LEDGER['QUEUES'][name]['HANDLER']``).

``record_run`` logs each run to a file of the worker's own, outside Redis, so that a
Redis that is killed cannot take the evidence with it: ``$BENCH_RUNS_DIR/runs-<worker
id>.log``, tab-separated lines, each appended with one ``write`` (whole lines survive a
SIGKILL):

* ``B id fence attempt worker unix_time``: the run began;
* ``E id fence``: the run ended (the handler returns: the worker then settles it
  COMPLETED).

``BENCH_WORK_SECONDS`` (default 0) makes each run sleep a random time up to that long,
so that runs are in flight when a fault lands.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

from django_ledger.core.worker import Job

_files: dict[str, int] = {}
_lock = threading.Lock()


def noop(job: Job) -> None:
    """Nothing: the benchmark measures the worker, not the work."""


def _run_log(worker_id: str) -> int:
    fd = _files.get(worker_id)
    if fd is None:
        with _lock:
            fd = _files.get(worker_id)
            if fd is None:
                folder = Path(os.environ.get("BENCH_RUNS_DIR", "."))
                name = "".join(c if c.isalnum() or c in "._-" else "_" for c in worker_id)
                flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
                fd = _files[worker_id] = os.open(folder / f"runs-{name}.log", flags, 0o644)
    return fd


def record_run(job: Job) -> None:
    """Log the run's start, work a little (``BENCH_WORK_SECONDS``), log its end."""
    claim = job.claim
    fd = _run_log(job.worker_id)
    began = f"B\t{claim.request_id}\t{claim.fence}\t{claim.attempt}\t{job.worker_id}\t{time.time():.6f}\n"
    os.write(fd, began.encode())
    work = float(os.environ.get("BENCH_WORK_SECONDS") or 0)
    if work > 0:
        time.sleep(random.random() * work)
    os.write(fd, f"E\t{claim.request_id}\t{claim.fence}\n".encode())
