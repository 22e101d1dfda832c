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
Without ``LEDGER_TEST_HALF`` (a developer's run) every file runs.

The cluster suite (``LEDGER_TEST_CLUSTER``, CI's cluster-a on Redis 7 and cluster-b on
Valkey 8) runs what reaches Redis differently on a cluster: the core's calls and scripts,
sharded queues, the worker's claims, wake-ups, cancels and counters, the scheduler's
scripts, and ``tests/cluster``. It leaves out (``ON_CLUSTER``) the faces over the core's
calls (the admin, the REST API, the task backend, the outbox, the commands and the
settings: ``tests/cluster/test_sharded_faces.py`` runs them over a queue spread on the
cluster's masters), what never reaches the suite's Redis (codecs, the fuzzer, checks,
the testing kit, the project's files), the long conservation runs, and a worker's or a
scheduler's process mechanics (signals, time-outs, probes, recycling: a standalone
server's). A path named on the command line runs whatever this says.

The core's and ``tests/cluster``'s tests that the cluster suite runs (``CROSSED``) run on each server once standalone
and once on a cluster: the cluster suite splits them into two shares by a hash of each
test's id (``LEDGER_TEST_SHARD``: cluster-a, on Redis, runs the first, cluster-b, on
Valkey, the second), so half ``a`` (Redis) runs the second share standalone and half
``b`` (Valkey) the first. A test a cluster skips (``standalone_only``) runs in both.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any

import pytest

HALF_ENV = "LEDGER_TEST_HALF"
CLUSTER_ENV = "LEDGER_TEST_CLUSTER"

#: Path (a folder or a file, from the project root) -> the one half that runs it (None:
#: both, where a folder above names one).
ONLY: dict[str, str | None] = {
    "tests/worker": "a",
    "tests/worker/test_worker_metrics.py": "b",
    "tests/worker/test_worker_probe.py": "b",
    "tests/worker/test_worker_http_probes.py": "b",
    "tests/worker/test_worker_recycle.py": "b",
    "tests/worker/test_worker_systemd.py": "b",
    "tests/worker/test_worker_logging.py": "b",
    "tests/project": "b",
    # Both: each half makes the new user's demo run on its own Python (the file says which).
    "tests/project/test_demo_new_user.py": None,
    "tests/core/test_conservation.py": "a",
    "tests/core/test_differential.py": "a",
    "tests/schedule/test_schedule_conservation.py": "a",
}


#: Path -> whether the cluster suite runs it (the most specific entry decides; not
#: named: it runs).
ON_CLUSTER: dict[str, bool] = {
    # Faces over the core's calls, and what never reaches the suite's Redis.
    "tests/admin": False,
    "tests/api": False,
    "tests/tasks": False,
    "tests/outbox": False,
    "tests/commands": False,
    "tests/commands/test_reshard.py": True,  # moves a queue's shards between masters
    "tests/config": False,
    "tests/testing": False,
    "tests/project": False,
    "tests/core/test_codec.py": False,
    "tests/core/test_codec_python.py": False,
    "tests/core/test_fuzz.py": False,
    # The long conservation runs: a standalone server's, under every fault they inject.
    "tests/core/test_conservation.py": False,
    "tests/schedule/test_schedule_conservation.py": False,
    "tests/worker/test_worker_conservation.py": False,
    # The scheduler's checks, monitors, command and processes.
    "tests/schedule/test_schedule_checks.py": False,
    "tests/schedule/test_schedule_queue_check.py": False,
    "tests/schedule/test_schedule_monitor_checks.py": False,
    "tests/schedule/test_schedule_monitor_pings.py": False,
    "tests/schedule/test_schedule_monitor_sender.py": False,
    "tests/schedule/test_scheduler_command.py": False,
    "tests/schedule/test_scheduler_probes.py": False,
    "tests/schedule/test_scheduler_processes.py": False,
    "tests/schedule/test_scheduler_published.py": False,
    "tests/schedule/test_runtime_schedule_processes.py": False,
    "tests/schedule/test_dispatch_settings.py": False,
    # A worker process's own mechanics.
    "tests/worker/test_worker_process.py": False,
    "tests/worker/test_worker_metrics.py": False,
    "tests/worker/test_worker_probe.py": False,
    "tests/worker/test_worker_http_probes.py": False,
    "tests/worker/test_worker_recycle.py": False,
    "tests/worker/test_worker_burst_repair.py": False,
    "tests/worker/test_worker_logging.py": False,
    "tests/worker/test_worker_escapes.py": False,
    "tests/worker/test_counters_off.py": False,
    "tests/worker/test_worker_systemd.py": False,
    "tests/worker/test_worker_tracing.py": False,
    "tests/worker/test_worker_connections.py": False,
}


#: Folders whose tests the two halves share out, crossed with the cluster suite's shares.
CROSSED = ("tests/core", "tests/cluster")
#: The cluster suite's share (K of 2, ``LEDGER_TEST_SHARD``) each half runs standalone.
CROSSED_SHARE = {"a": 2, "b": 1}


def _most_specific(table: dict[str, Any], path: str) -> Any:
    found = [key for key in table if path == key or path.startswith(key + "/")]
    return table[max(found, key=len)] if found else None


def half_of(path: str) -> str | None:
    """The half that alone runs ``path`` (``None``: both), by its most specific entry."""
    owner: str | None = _most_specific(ONLY, path)
    return owner


def on_cluster(path: str) -> bool:
    """Whether the cluster suite runs ``path``, by its most specific entry."""
    return _most_specific(ON_CLUSTER, path) is not False


def _named(collection_path: Path, config: pytest.Config) -> bool:
    """Whether the command line named this file (or a folder below the root holding it)."""
    for arg in config.args:
        named = Path(arg.split("::")[0]).resolve()
        if (
            named != config.rootpath
            and (named == collection_path or named in collection_path.parents)
            and named != config.rootpath / "tests"
        ):
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if not collection_path.is_file():
        return None
    try:
        path = collection_path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return None
    if os.environ.get(CLUSTER_ENV) and not on_cluster(path) and not _named(collection_path, config):
        return True
    half = os.environ.get(HALF_ENV)
    if not half:
        return None
    owner = half_of(path)
    return True if owner is not None and owner != half else None


def cluster_share(nodeid: str) -> int:
    """The share (1 or 2) of the cluster suite that runs test ``nodeid`` (redis_plugin's)."""
    return zlib.crc32(nodeid.encode()) % 2 + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    half = os.environ.get(HALF_ENV)
    if half not in CROSSED_SHARE or os.environ.get(CLUSTER_ENV):
        return
    kept, left = [], []
    for item in items:
        path = item.nodeid.split("::")[0]
        crossed = path.startswith(tuple(folder + "/" for folder in CROSSED)) and on_cluster(path)
        mine = (
            not crossed
            or item.get_closest_marker("standalone_only") is not None
            or cluster_share(item.nodeid) == CROSSED_SHARE[half]
            or _named(Path(str(item.path)), config)
        )
        (kept if mine else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
