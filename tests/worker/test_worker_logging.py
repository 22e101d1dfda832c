"""The worker logs one structured line per outcome through Django's logging config.

The logger is ``django_ledger.worker``. With no handler configured, ``ledger_worker``
prints to stdout; with a project ``LOGGING`` (``tests.support.worker_logging_settings``), the
project's handler gets the lines and stdout does not.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from django_ledger import Ledger
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until
from tests.support.worker_starts import starting
from tests.support.worker_variants import VariantWorker

Start = Callable[..., WorkerProcess]
#: ``key=value`` pairs of an outcome line (values hold no spaces).
PAIR = re.compile(r"(\w+)=(\S+)")
KEYS = ["outcome", "queue", "task", "id", "attempt", "fence", "seconds"]


@pytest.fixture
def start(redis_server: RedisServer, namespace: str, tmp_path: Path) -> Iterator[Start]:
    def make(args: list[str], log: Path, logger: str | None = None) -> WorkerProcess:
        if logger is None:
            return WorkerProcess(redis_server.url, namespace, args, log)
        env = {
            "LEDGER_TEST_LOG_FILE": str(tmp_path / "project.log"),
            "LEDGER_TEST_LOGGER": logger,
        }
        return VariantWorker(
            redis_server.url,
            namespace,
            args,
            log,
            settings="tests.support.worker_logging_settings",
            env=env,
        )

    yield from starting(tmp_path, make, suffix=".out")


def outcome_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "outcome=" in line]


def fields(line: str) -> dict[str, str]:
    return dict(PAIR.findall(line[line.index("outcome=") :]))


def admit_work(client: redis.Redis, namespace: str) -> None:
    """Three tasks that complete, and one that is retried twice, then fails: six outcomes."""
    Ledger(client, namespace, "raw").admit_many([(f"job-{n}", "x") for n in range(3)])
    Ledger(client, namespace, "failing").admit("bad", "x")


def check_outcomes(lines: list[str]) -> None:
    parsed = [fields(line) for line in lines]
    for one in parsed:
        assert list(one)[: len(KEYS)] == KEYS, one
    assert Counter((p["outcome"], p["queue"], p["task"]) for p in parsed) == {
        ("completed", "raw", "record"): 3,
        ("retry", "failing", "fail"): 2,
        ("failed", "failing", "fail"): 1,
    }
    assert sorted(p["id"] for p in parsed if p["queue"] == "raw") == ["job-0", "job-1", "job-2"]
    failing = sorted((p for p in parsed if p["queue"] == "failing"), key=lambda p: p["attempt"])
    assert [p["attempt"] for p in failing] == ["1", "2", "3"]
    assert all(p["reason"] == "builtins.RuntimeError" for p in failing)
    assert all("retry_in" in p for p in failing[:2]) and "retry_in" not in failing[2]
    assert all(float(p["seconds"]) >= 0 for p in parsed)


def test_without_logging_settings_the_lines_go_to_stdout(
    start: Start, redis_client: redis.Redis, namespace: str
) -> None:
    admit_work(redis_client, namespace)
    worker = start("raw", "failing", "--max-tasks", "6", "--concurrency", "2")
    assert worker.wait() == 0, worker.output()
    lines = outcome_lines(worker.output())
    assert len(lines) == 6, worker.output()
    check_outcomes(lines)
    levels = Counter(fields(line)["outcome"] + " " + line.split()[2] for line in lines)
    assert levels == {"completed INFO": 3, "retry INFO": 2, "failed WARNING": 1}


def test_with_logging_settings_the_project_s_handler_gets_the_lines(
    start: Start, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    admit_work(redis_client, namespace)
    worker = start(
        "raw", "failing", "--max-tasks", "6", "--concurrency", "2", logger="django_ledger"
    )
    assert worker.wait() == 0, worker.output()
    assert outcome_lines(worker.output()) == []  # the command added no handler of its own
    project = (tmp_path / "project.log").read_text()
    lines = outcome_lines(project)
    assert len(lines) == 6, project
    check_outcomes(lines)
    for line in lines:
        name, level, _ = line.split("|", 2)
        assert name == "django_ledger.worker"
        assert level == ("WARNING" if "outcome=failed" in line else "INFO")
    assert "django_ledger.worker|INFO|worker " in project  # start and stop lines too


def test_a_handler_on_the_worker_logger_alone_is_enough(
    start: Start, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    Ledger(redis_client, namespace, "raw").admit("job-0", "x")
    worker = start("raw", "--burst", logger="django_ledger.worker")
    assert worker.wait() == 0, worker.output()
    wait_until(lambda: (tmp_path / "project.log").exists(), what="the project's log file")
    assert len(outcome_lines((tmp_path / "project.log").read_text())) == 1
    assert outcome_lines(worker.output()) == []
