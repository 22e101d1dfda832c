"""The README's ```python blocks, run as written against the suite's Redis.

The install block configures a fresh namespace; the five lines then run in it, and
each comment's promise is checked: admitted once then a duplicate, the earliest due
first whoever admitted it, nothing when nothing is due, one holder at a time, a fence
that grows, settled exactly once or lost once the lease ran out.
"""

from __future__ import annotations

import contextlib
import io
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

import django_ledger
from django_ledger.conf import reset_connections
from django_ledger.core.ledger import Ledger
from django_ledger.core.records import State
from django_ledger.core.results import AdmissionStatus, SettlementStatus
from testproject.demo import seed_demo

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", README.read_text(), re.M | re.S)
FIVE_LINES = next(block for block in BLOCKS if "ledger.claim(" in block)
INSTALL = next(block for block in BLOCKS if "INSTALLED_APPS" in block)
TASKS_BLOCK = next(block for block in BLOCKS if "TASKS = " in block)


class Recorder:
    """A ledger that notes what each call answered (and may let a lease run out)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.calls: list[tuple[str, Any]] = []
        self.expire_leases = False
        #: Where the clock stands between calls (a skew of the Redis clock, in ms).
        self.skew = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ledger, name)

    def admit(self, *args: Any, **kwargs: Any) -> Any:
        answer = self.ledger.admit(*args, **kwargs)
        self.calls.append(("admit", answer))
        return answer

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        answer = self.ledger.claim(*args, **kwargs)
        self.calls.append(("claim", answer))
        if answer is not None and self.expire_leases:
            # The work took longer than the lease: the server clock moves past it.
            self.ledger.clock_skew_ms = answer.lease_until - self.ledger.server_time_ms() + 1
        return answer

    def settle(self, *args: Any, **kwargs: Any) -> Any:
        answer = self.ledger.settle(*args, **kwargs)
        self.calls.append(("settle", answer))
        self.ledger.clock_skew_ms = self.skew
        return answer

    def answers(self, name: str) -> list[Any]:
        return [answer for call, answer in self.calls if call == name]


@pytest.fixture
def readme_settings(namespace: str) -> Iterator[dict[str, Any]]:
    """Run the README's install block, with the test's namespace, as the settings."""
    scope: dict[str, Any] = {}
    exec(INSTALL, scope)
    assert {"rangefilter", "django_ledger"} <= set(scope["INSTALLED_APPS"]) - {...}
    assert {"rangefilter", "django_ledger"} <= set(settings.INSTALLED_APPS)
    # The README shows a Redis URL; the test runs it on the suite's own Redis.
    assert scope["LEDGER"]["CONNECTION"].startswith("redis://")
    config = {
        **scope["LEDGER"],
        "NAMESPACE": namespace,
        "CONNECTION": settings.LEDGER["CONNECTION"],
    }
    with override_settings(LEDGER=config):
        yield config
    reset_connections()


@pytest.fixture
def recorder(readme_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Recorder:
    from django_ledger.conf import get_ledger

    recorder = Recorder(get_ledger("webhooks"))
    monkeypatch.setattr(django_ledger, "get_ledger", lambda queue="default": recorder)
    return recorder


def run_five_lines() -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(FIVE_LINES, {})
    return out.getvalue().splitlines()


def test_the_install_block_configures_working_queues(readme_settings: dict[str, Any]) -> None:
    from django_ledger.conf import get_ledger

    assert get_ledger("emails").max_attempts == 5
    ledger = get_ledger("default")  # through the "default" cache alias of CACHES
    assert ledger.admit("a", "1").status is AdmissionStatus.ADMITTED
    record = ledger.resolve("a")
    assert record is not None and record.state is State.PENDING


def test_the_five_lines_use_a_raw_queue_no_task_of_the_readme_serves(
    readme_settings: dict[str, Any],
) -> None:
    from django_ledger.services.worker import task_queues

    raw_queue = re.search(r'get_ledger\("([^"]+)"\)', FIVE_LINES)
    assert raw_queue is not None
    declared = re.findall(r'queue_name="([^"]+)"', TASKS_BLOCK)
    task_setting = TASKS_BLOCK.split("\n", 1)[0]
    scope: dict[str, Any] = {}
    exec(task_setting, scope)
    with override_settings(TASKS=scope["TASKS"]):
        served = task_queues()
    assert raw_queue.group(1) in readme_settings["QUEUES"]
    assert raw_queue.group(1) not in served
    assert declared and set(declared) <= set(served) <= set(readme_settings["QUEUES"])


def test_the_five_lines_on_a_fresh_queue_and_again(recorder: Recorder) -> None:
    lines = run_five_lines()
    claim = recorder.answers("claim")[0]
    assert claim is not None and lines == [f"sending order-1042:receipt fence {claim.fence}"]
    (admitted,) = recorder.answers("admit")
    assert admitted.status is AdmissionStatus.ADMITTED
    assert [s.status for s in recorder.answers("settle")] == [SettlementStatus.SETTLED]
    assert recorder.answers("claim")[-1] is None  # the loop ends once none is due
    record = recorder.resolve("order-1042:receipt")
    assert record is not None and record.state is State.COMPLETED and record.attempts == 1

    # Run again, as a second worker start would: a duplicate, nothing due, no error.
    recorder.calls.clear()
    assert run_five_lines() == []
    assert [a.status for a in recorder.answers("admit")] == [AdmissionStatus.DUPLICATE]
    assert recorder.answers("claim") == [None] and recorder.answers("settle") == []
    assert recorder.resolve("order-1042:receipt") == record


def test_earliest_due_first_and_one_holder_at_a_time(recorder: Recorder) -> None:
    recorder.ledger.admit("order-1041:receipt", '{"to": "bob@example.com"}')
    other = recorder.ledger.claim("worker-3", lease=600)
    assert other is not None and other.request_id == "order-1041:receipt"
    # Admitted by others before 1042, a millisecond apart, against the order of their ids.
    for request_id in ("order-1040:receipt", "order-1039:receipt"):
        time.sleep(0.002)
        assert recorder.ledger.admit(request_id, "{}").accepted
    time.sleep(0.002)
    lines = run_five_lines()
    # Due first, claimed first, whoever admitted them; the one held by worker-3 is not taken.
    assert [line.split()[1] for line in lines] == [
        "order-1040:receipt",
        "order-1039:receipt",
        "order-1042:receipt",
    ]
    still = recorder.resolve("order-1041:receipt")
    assert still is not None and still.state is State.CLAIMED and still.owner == "worker-3"
    assert recorder.settle(other, State.COMPLETED).status is SettlementStatus.SETTLED


def test_in_the_demo_every_due_record_is_worked_off_yours_included(recorder: Recorder) -> None:
    seed_demo(recorder.ledger)
    lines = run_five_lines()
    sent = [line.split()[1] for line in lines]
    assert sent[-1] == "order-1042:receipt" and "demo-pending" in sent
    for request_id in sent:
        record = recorder.resolve(request_id)
        assert record is not None and record.state is State.COMPLETED


def test_settled_exactly_once_or_lost_once_the_lease_ran_out(recorder: Recorder) -> None:
    recorder.expire_leases = True
    lines = run_five_lines()
    first = recorder.answers("claim")[0]
    assert first is not None and lines == [f"sending order-1042:receipt fence {first.fence}"]
    (lost,) = recorder.answers("settle")
    assert lost.status is SettlementStatus.LOST
    record = recorder.resolve("order-1042:receipt")
    assert record is not None and record.state is State.CLAIMED  # nothing settled

    # A minute on, repair gives the expired claim back; the next run takes it again,
    # with a larger fence.
    recorder.skew = recorder.ledger.clock_skew_ms = 61_000
    raw = recorder.redis.hget(recorder.records_key, "order-1042:receipt")
    assert recorder.ledger.repair_records([("order-1042:receipt", raw)]).expired == 1
    recorder.expire_leases = False
    recorder.calls.clear()
    (line,) = run_five_lines()
    claim = recorder.answers("claim")[0]
    assert line == f"sending order-1042:receipt fence {claim.fence}" and claim.fence > first.fence
    (settled,) = recorder.answers("settle")
    assert settled.status is SettlementStatus.SETTLED
    # Exactly once: the same claim settles no second time.
    assert recorder.settle(claim, State.FAILED).status is SettlementStatus.LOST
    record = recorder.resolve("order-1042:receipt")
    assert record is not None and record.state is State.COMPLETED
