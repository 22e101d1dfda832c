"""Schedules stored at run time, changed through the API while three schedulers run.

Three ``manage.py ledger_scheduler`` processes run on the suite's redis-server while the
test creates schedules over the REST API, changes one's cron, another's time zone,
pauses and deletes a third, and sets a one-off: every fire due is admitted once, across
the three, none after a pause or a deletion, and each change holds from the next fire
after it. Time is the server's; each wait is on a condition with a deadline.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from rest_framework.test import APIClient

import tests.support.tasks_app.tasks  # noqa: F401 - the web process imported its tasks
from django_ledger.core.ledger import Ledger
from django_ledger.core.schedule import ScheduleStore
from django_ledger.services.scheduler import KILL_AFTER_CLAIM_ENV
from tests.schedule.test_scheduler_processes import ROOT, Scheduler
from tests.support.redis_server import RedisServer
from tests.support.worker_process import wait_until

pytest_plugins = ["tests.support.api_fixtures"]

TASK = "tests.support.tasks_app.tasks.noop"
EVERY_SECOND = {"task": TASK, "every": 1, "misfire": "all", "grace": 120}


@pytest.fixture
def schedulers(
    redis_server: RedisServer, api_namespace: str, tmp_path: Path
) -> Iterator[list[Scheduler]]:
    env = {name: value for name, value in os.environ.items() if name != KILL_AFTER_CLAIM_ENV}
    env.update(
        REDIS_URL=redis_server.url,
        DJANGO_SETTINGS_MODULE="testproject.settings",
        LEDGER_NAMESPACE=api_namespace,
        LEDGER_SCHEDULES="{}",
        PYTHONPATH=str(ROOT),
    )
    started = [Scheduler(tmp_path / f"scheduler-{n}.log", env) for n in range(3)]
    yield started
    for process in started:
        if process.process.poll() is None:
            process.process.kill()
            process.process.wait()


@pytest.mark.standalone_only(reason="its scheduler processes connect to the standalone URL")
def test_three_schedulers_follow_schedules_created_edited_paused_and_deleted_over_the_api(
    schedulers: list[Scheduler],
    api_root: APIClient,
    redis_client: redis.Redis,
    api_namespace: str,
) -> None:
    store = ScheduleStore(redis_client, api_namespace)
    ledger = Ledger(redis_client, api_namespace, "default")

    def now() -> int:
        return store.server_time_ms() // 1000

    def fired(key: str) -> list[int]:
        return sorted(e for k, e, _ in _admitted(schedulers) if k == key)

    def call(method: Callable[..., Any], path: str, body: Any = None) -> tuple[int, int]:
        """Call the API; return the server's second just before and just after."""
        before = now()
        response = method(path, body, format="json")
        assert response.status_code in (200, 201, 204), response.content
        return before, now()

    wait_until(lambda: all(": schedules " in p.output for p in schedulers), 60, "three schedulers")
    if now() % 3600 > 3600 - 30:  # the hour in CRON below must hold for the whole test
        wait_until(lambda: now() % 3600 < 30, 40, "the next hour")
    hour = datetime.fromtimestamp(now(), UTC).hour
    post, put = api_root.post, api_root.put
    _, made_a = call(post, "/api/schedules/", {"key": "a", **EVERY_SECOND})
    _, made_b = call(
        post,
        "/api/schedules/",
        {"key": "b", "task": TASK, "cron": f"* * {hour} * * *", "misfire": "all"},
    )
    _, made_c = call(post, "/api/schedules/", {"key": "c", **EVERY_SECOND})
    once = now() + 3
    at = datetime.fromtimestamp(once, UTC).isoformat()
    call(post, "/api/schedules/", {"key": "once", "task": TASK, "at": at})
    wait_until(lambda: all(len(fired(k)) >= 2 for k in "abc"), 30, "fires of a, b and c")

    # a: every second, then every other second; b: into a zone where it is another hour.
    edit_a = call(
        put, "/api/schedules/a/", {**EVERY_SECOND, "every": None, "cron": "*/2 * * * * *"}
    )
    edit_b = call(
        put,
        "/api/schedules/b/",
        {"task": TASK, "cron": f"* * {hour} * * *", "timezone": "Asia/Kathmandu"},
    )
    pause_c = call(post, "/api/schedules/c/pause/")
    wait_until(lambda: now() >= max(edit_a[1], once) + 3, 30, "three seconds more")
    delete_c = call(api_root.delete, "/api/schedules/c/")
    wait_until(lambda: now() >= delete_c[1] + 2, 30, "two seconds after the deletion")
    end = now()
    wait_until(lambda: len(fired("a")) and fired("a")[-1] >= end - 1, 30, "a's last fire")
    for process in schedulers:  # all at once (a second signal would stop one at once)
        process.process.send_signal(signal.SIGTERM)
    codes = [process.process.wait(30) for process in schedulers]
    assert codes == [0, 0, 0], [p.output[-2000:] for p in schedulers]

    # Each fire admitted once across the three, and each in the ledger once.
    counts = Counter((k, e) for k, e, _ in _admitted(schedulers))
    assert counts and set(counts.values()) == {1}
    stored = {k.decode() for k in redis_client.hkeys(ledger.records_key)}
    assert stored == {f"schedule:{k}:{e}" for k, e in counts}
    # a: each second up to the edit, then the even seconds only, none skipped.
    a = fired("a")
    assert [e for e in a if e <= edit_a[0]] == list(range(made_a + 1, edit_a[0] + 1))
    after = [e for e in a if e > edit_a[1]]
    assert after and after == list(range(after[0], after[-1] + 1, 2)) and after[0] % 2 == 0
    assert after[0] <= edit_a[1] + 2
    # b: each second up to the edit, none after (it is not that hour in Kathmandu).
    b = fired("b")
    assert [e for e in b if e <= edit_b[0]] == list(range(made_b + 1, edit_b[0] + 1))
    assert not [e for e in b if e > edit_b[1]]
    # c: each second until paused, none after (paused, then deleted).
    c = fired("c")
    assert c[0] == made_c + 1 and c == list(range(c[0], c[-1] + 1))
    assert pause_c[0] <= c[-1] + 1 and c[-1] <= pause_c[1] + 1
    # the one-off: once, at its time.
    assert fired("once") == [once]
    assert api_root.get("/api/schedules/once/").json()["done"] is True
    assert store.snapshot().through.get("once", 0) >= once
    assert "c" not in store.snapshot().through


def _admitted(processes: list[Scheduler]) -> list[tuple[str, int, bool]]:
    return [entry for process in processes for entry in process.admitted()]
