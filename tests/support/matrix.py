"""Which of CI's two whole-suite environments runs a test file (``LEDGER_TEST_HALF``).

CI runs the suite twice: half ``a`` is Python 3.11 with Django 5.2 on Redis 7
(py311-django52), half ``b`` Python 3.13 with Django 6.1 on Valkey 8 (py313-django61).
Most files run in both. A file whose answers depend neither on Django's version nor on
the server, only on a process's own mechanics or on the project's files, runs in one of
them, so the two fit CI's time together: the worker's process tests (the core worker
runtime on raw handlers, which the cluster suite also runs on Valkey) in ``a``; the
metrics endpoint, probes, recycling, systemd and logging of a worker process, and the
project's own checks (docs, demo, package, catalogs), in ``b``; the long conservation
and differential runs of the Django-free core in ``a``. The most specific path decides.
Without ``LEDGER_TEST_HALF`` (a developer's run, the cluster suite) every file runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HALF_ENV = "LEDGER_TEST_HALF"

#: Path (a folder or a file, from the project root) -> the one half that runs it.
ONLY: dict[str, str] = {
    "tests/worker": "a",
    "tests/worker/test_worker_metrics.py": "b",
    "tests/worker/test_worker_probe.py": "b",
    "tests/worker/test_worker_http_probes.py": "b",
    "tests/worker/test_worker_recycle.py": "b",
    "tests/worker/test_worker_systemd.py": "b",
    "tests/worker/test_worker_logging.py": "b",
    "tests/project": "b",
    # It runs the demo on Python 3.11 and 3.13 itself, from the Python 3.11 suite.
    "tests/project/test_demo_new_user.py": "a",
    "tests/core/test_conservation.py": "a",
    "tests/core/test_differential.py": "a",
    "tests/schedule/test_schedule_conservation.py": "a",
}


def half_of(path: str) -> str | None:
    """The half that alone runs ``path`` (``None``: both), by its most specific entry."""
    found = [key for key in ONLY if path == key or path.startswith(key + "/")]
    return ONLY[max(found, key=len)] if found else None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    half = os.environ.get(HALF_ENV)
    if not half or not collection_path.is_file():
        return None
    try:
        path = collection_path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return None
    owner = half_of(path)
    return True if owner is not None and owner != half else None
