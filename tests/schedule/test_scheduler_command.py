"""``manage.py ledger_scheduler`` in this process: ``--once``, ``--explain``, errors; and the
service the worker embeds (``start_scheduler_thread``)."""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Iterator
from datetime import datetime
from io import StringIO
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis
from django.core.management import CommandError, call_command

from django_ledger.conf import get_ledger
from django_ledger.core.schedule import state_key
from django_ledger.management.commands.ledger_scheduler import _stop_on_signals
from django_ledger.services import scheduler

TASK = "tests.support.tasks_app.tasks.noop"


@pytest.fixture
def scheduled(settings: Any, namespace: str, redis_client: redis.Redis) -> Iterator[str]:
    """The test's namespace for the ledger and the registry, with two schedules."""
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "DISPATCH": {"NAMESPACE": namespace},
        "SCHEDULES": {
            "tick": {"TASK": TASK, "EVERY": 1, "MISFIRE": "all", "GRACE": 60},
            "nightly": {"TASK": TASK, "CRON": "30 2 * * *", "TIMEZONE": "Europe/Paris"},
        },
    }
    yield namespace
    redis_client.delete(state_key(namespace))


def run(*args: str) -> str:
    out = StringIO()
    call_command("ledger_scheduler", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_explain_prints_the_next_ten_fires_in_utc_and_local_time(scheduled: str) -> None:
    text = run("--explain", "nightly")

    assert "At 02:30 every day (Europe/Paris)" in text
    assert "from the Redis server's clock" in text
    rows = re.findall(r"^  (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC\s+(\S+ \S+) (\S+) \(", text, re.M)
    assert len(rows) == 10
    paris = ZoneInfo("Europe/Paris")
    for utc_text, local_text, _ in rows:
        utc = datetime.fromisoformat(utc_text + "+00:00")
        assert utc.astimezone(paris).strftime("%Y-%m-%d %H:%M:%S") == local_text
        assert local_text.endswith("02:30:00") or local_text.endswith("03:00:00")


def test_explain_counts(scheduled: str) -> None:
    text = run("--explain", "tick", "--count", "3")

    assert "Every second" in text
    assert len(re.findall(r"^  \d{4}-", text, re.M)) == 3


def test_explain_of_an_unknown_key_names_the_configured_ones(scheduled: str) -> None:
    with pytest.raises(CommandError, match=r"no schedule 'nope'.*'tick', 'nightly'"):
        run("--explain", "nope")


def test_once_runs_one_tick_and_admits_what_is_due(scheduled: str) -> None:
    store = scheduler.store()
    now = store.server_time_ms() // 1000
    store.set_through("tick", now - 3)
    store.set_through("nightly", now)

    text = run("--once")

    admitted = re.findall(r"^admitted (schedule:tick:(\d+)) ", text, re.M)
    assert len(admitted) >= 3
    epochs = [int(epoch) for _, epoch in admitted]
    assert epochs == list(range(now - 2, now - 2 + len(epochs)))
    ledger = get_ledger("default")
    assert all(ledger.resolve(request_id) is not None for request_id, _ in admitted)
    assert re.search(rf"^one tick at \S+: {len(admitted)} admitted, 0 already", text, re.M)


def test_a_bad_setting_stops_the_command_with_its_check_id(settings: Any) -> None:
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": {"x": {"TASK": TASK, "CRON": "nope"}}}

    with pytest.raises(CommandError, match=r"django_ledger\.E075"):
        run("--once")


def test_the_worker_embeds_a_scheduler_thread_that_stops_on_its_event(scheduled: str) -> None:
    store = scheduler.store()
    store.set_through("tick", store.server_time_ms() // 1000 - 1)
    store.set_through("nightly", store.server_time_ms() // 1000)
    stop = threading.Event()

    thread = scheduler.start_scheduler_thread(stop, interval=0.2, node_id="worker-1")

    ledger = get_ledger("default")
    pause = threading.Event()
    for _ in range(100):  # up to 10 s: the fire due now is admitted by the thread
        if ledger.stats().total >= 1:
            break
        pause.wait(0.1)
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert ledger.stats().total >= 1
    dispatches = scheduler.get_dispatch_registry().history("tick")
    assert dispatches and {d.node_id for d in dispatches} == {"worker-1"}


def test_a_bad_setting_stops_the_thread_before_it_starts(settings: Any) -> None:
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": {"x": {"TASK": TASK}}}

    with pytest.raises(Exception, match=r"E074"):
        scheduler.start_scheduler_thread(threading.Event())


def test_a_signal_stops_the_loop_and_a_second_exits_at_once() -> None:
    stop = threading.Event()

    with pytest.raises(SystemExit) as exited, _stop_on_signals(stop):
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5)  # the first only asks the loop to stop
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(5)  # the second does not wait for it

    assert exited.value.code == 128 + signal.SIGTERM


def status(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ledger_status", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_ledger_status_scheduler_passes_while_the_node_ticks_and_fails_once_it_is_stale(
    scheduled: str,
) -> None:
    run("--once", "--node-id", "ticking")
    out, _ = status("--scheduler", "ticking", "--max-age", "30")
    assert "scheduler ticking is fresh: it ticked" in out
    with pytest.raises(CommandError, match="scheduler nobody has published nothing"):
        status("--scheduler", "nobody")
    store = scheduler.store()
    store.publish("late", store.server_time_ms() - 90_000, [], 60_000)  # its last tick, 90 s ago
    with pytest.raises(
        CommandError, match=r"scheduler late is stale: it last ticked 9\d\.\d s ago"
    ):
        status("--scheduler", "late", "--max-age", "60")
    assert "fresh" in status("--scheduler", "late", "--max-age", "120")[0]
    with pytest.raises(CommandError, match="--max-age must be more than 0"):
        status("--scheduler", "ticking", "--max-age", "0")
    store.unpublish("ticking")
    store.unpublish("late")
