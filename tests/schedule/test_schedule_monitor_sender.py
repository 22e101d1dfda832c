"""Monitor check-ins go out from a sender thread: Sentry's through ``sentry_sdk``, a ping
URL's by HTTP; a slow, failing or flooded target never blocks nor raises into the caller,
and its URL never reaches the log."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from django_ledger.core.results import AdmissionStatus
from django_ledger.core.schedule import Fire
from django_ledger.core.schedule.monitor import Monitor, Pinger, fired_schedule, run_id
from django_ledger.core.schedule.state import state_key
from django_ledger.defaults import usable_name
from django_ledger.schedules.monitoring import PINGER, fired
from django_ledger.schedules.watch import task_ended, task_started
from django_ledger.services import scheduler

TASK = "tests.support.tasks_app.tasks.noop"


class Answering:
    """An HTTP server that answers ``status``, or holds each request until released."""

    def __init__(self, status: int = 200) -> None:
        self.release = threading.Event()
        self.status = status
        self.hits = 0
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                owner.hits += 1
                owner.paths.append(self.path.split("?")[0])
                if status == 0:
                    owner.release.wait(10)
                self.send_response(status or 200)
                if status == 302:  # elsewhere on this server: not followed
                    self.send_header("Location", "/elsewhere")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token-abc123"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def answering(request: pytest.FixtureRequest) -> Iterator[Answering]:
    server = Answering(getattr(request, "param", 200))
    yield server
    server.close()


def test_a_fire_request_id_names_its_schedule() -> None:
    assert fired_schedule("schedule:nightly:1700000000") == ("nightly",)
    assert fired_schedule("schedule:a:b:1700000000") == ("a:b",)
    # A manual fire; a schedule whose key ends in ":manual" is tried first.
    assert fired_schedule("schedule:nightly:manual:1700000000") == ("nightly:manual", "nightly")
    for other in ("order-42", "schedule:", "schedule::1", "schedule:nightly:x", "schedule:nightly"):
        assert fired_schedule(other) == ()
    assert run_id("schedule:n:1") == run_id("schedule:n:1") != run_id("schedule:n:2")


@given(
    key=st.text(min_size=1, max_size=100).filter(usable_name),
    epoch=st.integers(0, 10**11),
    manual=st.booleans(),
)
def test_every_fire_request_id_leads_back_to_its_schedule(
    key: str, epoch: int, manual: bool
) -> None:
    assert key in fired_schedule(Fire(key, epoch, manual=manual).request_id)


@pytest.mark.parametrize("answering", [500, 302], indirect=True)
def test_a_failing_ping_is_counted_and_logged_by_host_only(
    answering: Answering, caplog: pytest.LogCaptureFixture
) -> None:
    pinger = Pinger()
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{free.getsockname()[1]}/token-closed"
    caplog.set_level(logging.WARNING, "django_ledger.monitor")

    assert pinger.check_in(Monitor(url=answering.url), "start", "schedule:n:1")
    assert pinger.check_in(Monitor(url=closed), "ok", "schedule:n:1")
    assert pinger.flush(10)

    assert (pinger.sent, pinger.failed, pinger.dropped) == (0, 2, 0)
    assert answering.paths == ["/token-abc123/start"]  # a redirect is not followed
    logged = caplog.text
    assert f"start ping to 127.0.0.1: HTTP {answering.status}" in logged
    assert "ok ping to 127.0.0.1: ConnectionRefusedError" in logged
    assert "token" not in logged and str(answering.server.server_address[1]) not in logged


@pytest.mark.parametrize("answering", [0], indirect=True)
def test_a_hanging_target_never_blocks_the_caller_and_a_full_queue_drops(
    answering: Answering,
) -> None:
    pinger = Pinger(size=2, timeout=0.2)
    monitor = Monitor(url=answering.url)

    queued = [pinger.check_in(monitor, "start", f"schedule:n:{i}") for i in range(10)]

    # None waited on the server: one is being sent (held by it), two wait, the others
    # are dropped.
    assert queued.count(True) in (2, 3) and pinger.dropped == queued.count(False)
    assert pinger.flush(10)
    assert pinger.failed == queued.count(True)  # each timed out after 0.2 s
    assert pinger.sent == 0


class Captured:
    """A ``sentry_sdk`` transport that keeps the check-ins it is given."""

    def __init__(self) -> None:
        self.check_ins: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") == "check_in":
            self.check_ins.append(event)


@pytest.fixture
def sentry() -> Iterator[Captured]:
    sentry_sdk = pytest.importorskip("sentry_sdk")
    from sentry_sdk.transport import Transport

    captured = Captured()

    class Capturing(Transport):
        def capture_envelope(self, envelope: Any) -> None:
            for item in envelope.items:
                if item.type == "check_in":
                    captured(item.payload.json)

    sentry_sdk.init(
        dsn="https://public@sentry.invalid/1",
        transport=Capturing(),
        default_integrations=False,
        auto_enabling_integrations=False,
    )
    try:
        yield captured
    finally:
        sentry_sdk.get_client().close()
        sentry_sdk.get_global_scope().set_client(None)


def test_a_sentry_monitor_checks_in_progress_then_ok_or_error_for_one_run(
    sentry: Captured, settings: Any, namespace: str, redis_client: redis.Redis
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "DISPATCH": {"NAMESPACE": namespace},
        "SCHEDULES": {
            "nightly": {
                "TASK": TASK,
                "CRON": "30 2 * * *",
                "TIMEZONE": "Europe/Paris",
                "MONITOR": {"SENTRY": "nightly-report"},
            },
            "beat": {"TASK": TASK, "EVERY": 300, "MONITOR": {"SENTRY": "beat"}},
        },
    }
    try:
        fire, status = scheduler.trigger("nightly", by="test")  # the real admission path
        task_started("default", fire.request_id, 1)  # what the worker calls
        task_ended("default", fire.request_id, completed=True)
        task_started("default", "order-42", 1)  # not a fire: nothing
        task_ended("default", "order-42", completed=False)
        beat, _ = scheduler.trigger("beat", by="test")
        task_started("default", beat.request_id, 1)
        task_started("default", beat.request_id, 2)  # a retry: no second start
        task_ended("default", beat.request_id, completed=False)
        assert PINGER.flush(10)
    finally:
        redis_client.delete(state_key(namespace))

    assert status is AdmissionStatus.ADMITTED
    nightly_id, beat_id = run_id(fire.request_id).hex, run_id(beat.request_id).hex
    cron = {"schedule": {"type": "crontab", "value": "30 2 * * *"}, "timezone": "Europe/Paris"}
    every = {"schedule": {"type": "interval", "value": 5, "unit": "minute"}, "timezone": "UTC"}
    assert [
        (c["monitor_slug"], c["check_in_id"], c["status"], c["monitor_config"])
        for c in sentry.check_ins
    ] == [
        ("nightly-report", nightly_id, "in_progress", cron),
        ("nightly-report", nightly_id, "ok", cron),
        ("beat", beat_id, "in_progress", every),
        ("beat", beat_id, "error", every),
    ]


def test_a_fire_the_ledger_rejects_checks_in_an_error_at_once(answering: Answering) -> None:
    monitor = Monitor(url=answering.url)

    fired(Fire("nightly", 1_700_000_000), monitor, AdmissionStatus.REJECTED)
    fired(Fire("nightly", 1_700_000_060), monitor, AdmissionStatus.ADMITTED)  # the worker's
    fired(Fire("nightly", 1_700_000_120), None, AdmissionStatus.REJECTED)  # no monitor
    assert PINGER.flush(10)

    assert answering.paths == ["/token-abc123/fail"]


def test_a_schedule_stored_at_run_time_checks_in_as_a_settings_one(
    answering: Answering, settings: Any, namespace: str, redis_client: redis.Redis
) -> None:
    from django_ledger.services import runtime_schedules

    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace, "SCHEDULES": {}}
    entry = {"TASK": TASK, "EVERY": 300, "MONITOR": {"URL": answering.url}}
    runtime_schedules.create("stored-beat", entry, by="test")
    try:
        fire = "schedule:stored-beat:1800000000"
        task_started("default", fire, 1)  # what the worker calls: the store is read aside
        task_ended("default", fire, completed=True)
        task_started("default", "schedule:not-there:1800000000", 1)  # no such schedule
        assert PINGER.flush(10)
    finally:
        runtime_schedules.delete("stored-beat", by="test")
        redis_client.delete(state_key(namespace))
    assert answering.paths == ["/token-abc123/start", "/token-abc123"]
