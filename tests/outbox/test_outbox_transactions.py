"""Enqueue inside ``transaction.atomic()``: a task exists iff its transaction committed.

Through Django's public task API, on the suite's database (SQLite by default; the same
tests run on PostgreSQL in ``test_outbox_postgres.py``). The relay and the fenced
effects are exercised in-process; ``run_claimed`` plays a worker's step.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.core import checks
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from django_ledger.checks.tasks import check_outbox, check_tasks
from django_ledger.models import OutboxEntry
from django_ledger.queues import queues
from django_ledger.services.relay import Relay
from django_ledger.tasks import enqueue_many, enqueue_once
from django_ledger.tasks.compat import TaskResultDoesNotExist, TaskResultStatus
from django_ledger.tasks.exceptions import TaskIdConflict
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed

pytest_plugins = ["tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


def _stats() -> Any:
    return queues.get("default").ledger.stats()


def test_a_rolled_back_transaction_leaves_no_task(task_namespace: str) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        result = tasks.add.enqueue(1, 2)
        assert result.status == TaskResultStatus.READY
        assert tasks.add.get_result(result.id).status == TaskResultStatus.READY
        raise RuntimeError("roll back")
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)
    assert _stats().pending == 0
    assert OutboxEntry.objects.count() == 0
    assert run_claimed() is None


def test_a_worker_sees_no_task_before_the_commit(task_namespace: str) -> None:
    with transaction.atomic():
        result = tasks.add.enqueue(2, 3)
        many = enqueue_many(tasks.add, [((1, 1), {}), ((2, 2), {})])
        once = enqueue_once(tasks.add, "order-1:add", 4, 4)
        assert run_claimed() is None  # nothing is in Redis yet
        assert _stats().pending == 0
        assert OutboxEntry.objects.count() == 4
    # committed: the committer admitted all four on commit, and deleted the rows
    assert _stats().pending == 4
    assert OutboxEntry.objects.count() == 0
    ran = {run_claimed()[0].claim.request_id for _ in range(4)}  # type: ignore[index]
    assert ran == {result.id, once.id, *(r.id for r in many)}
    assert tasks.add.get_result(result.id).return_value == 5
    assert run_claimed() is None  # admitted once


def test_a_savepoint_rolled_back_drops_only_its_tasks(task_namespace: str) -> None:
    with transaction.atomic():
        kept = tasks.add.enqueue(1, 1)
        with pytest.raises(RuntimeError), transaction.atomic():
            dropped = tasks.add.enqueue(9, 9)
            raise RuntimeError("inner")
        later = tasks.add.enqueue(2, 2)
    assert _stats().pending == 2
    assert tasks.add.get_result(kept.id).status == TaskResultStatus.READY
    assert tasks.add.get_result(later.id).status == TaskResultStatus.READY
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(dropped.id)


def test_one_on_commit_callback_per_transaction(task_namespace: str) -> None:
    with transaction.atomic():
        for n in range(5):
            tasks.add.enqueue(n, n)
        assert len(transaction.get_connection().run_on_commit) == 1


def test_outside_a_transaction_an_enqueue_admits_at_once(task_namespace: str) -> None:
    result = tasks.add.enqueue(1, 2)
    assert _stats().pending == 1
    assert OutboxEntry.objects.count() == 0
    assert tasks.add.get_result(result.id).enqueued_at is not None


def test_redis_down_at_commit_keeps_the_row_for_the_relay(
    task_namespace: str, fresh_redis: RedisServer
) -> None:
    from tests.support.tasks_helpers import ledger_settings_for

    ledger = ledger_settings_for(task_namespace)
    ledger["CONNECTION"] = fresh_redis.url
    with override_settings(LEDGER=ledger):
        fresh_redis.stop()
        with transaction.atomic():
            result = tasks.add.enqueue(3, 4)
        # the commit stood; admitting it failed, so the row waits (and reads READY)
        assert OutboxEntry.objects.filter(pk=result.id).exists()
        assert tasks.add.get_result(result.id).status == TaskResultStatus.READY
        assert Relay(["default"]).run_once() == 0  # Redis still away: kept
        assert OutboxEntry.objects.filter(pk=result.id).exists()
        fresh_redis.restart()  # the same port: the ledger's client reconnects
        assert Relay(["default"]).run_once() == 1
        assert not OutboxEntry.objects.exists()
        assert _stats().pending == 1
        assert run_claimed() is not None
        assert tasks.add.get_result(result.id).return_value == 7


def test_a_row_the_relay_and_the_committer_both_deliver_is_admitted_once(
    task_namespace: str,
) -> None:
    # A relay that delivered but died before deleting, and the committer after it.
    with transaction.atomic():
        result = tasks.add.enqueue(5, 5)
        staged = list(OutboxEntry.objects.all())
    from django_ledger.outbox.delivery import admit_rows

    assert admit_rows(staged) == ([result.id], [])  # answers DUPLICATE: delivered
    OutboxEntry.objects.bulk_create(staged)  # as if it had not been deleted
    assert Relay(["default"]).run_once() == 1
    assert _stats().pending == 1


def test_relays_racing_on_the_same_rows_admit_each_once(task_namespace: str) -> None:
    from django.db import connection

    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.skip(
            "threads on the in-memory SQLite test database share one cache, whose table "
            "locks ignore the busy time-out; run this on a file or PostgreSQL database"
        )
    rows = [
        OutboxEntry(id=f"race-{n}", backend="default", queue="default", payload=_payload(n))
        for n in range(300)
    ]
    OutboxEntry.objects.bulk_create(rows)
    delivered: list[int] = []
    errors: list[BaseException] = []

    def relay() -> None:
        try:
            delivered.append(Relay(["default"], batch=40).run_once())
        except BaseException as exc:  # pragma: no cover - shown by the assert
            errors.append(exc)
        finally:
            from django.db import connections

            connections.close_all()

    threads = [threading.Thread(target=relay) for _ in range(2)]
    for thread in threads:
        thread.start()
    Relay(["default"], batch=40).run_once()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert not OutboxEntry.objects.exists()
    stats = _stats()
    assert stats.pending == 300  # each admitted once (DUPLICATE for the others)


def _tasks() -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.TASKS["default"])


def _payload(n: int) -> str:
    from django_ledger.core.jobs import encode_task

    return encode_task("tests.support.tasks_app.tasks.add", [n, n], {})


def test_on_commit_mode_admits_after_the_commit_without_a_row(task_namespace: str) -> None:
    with override_settings(
        TASKS={"default": {**_tasks(), "OPTIONS": {"TRANSACTIONS": "on_commit"}}}
    ):
        with transaction.atomic():
            result = tasks.add.enqueue(1, 1)
            assert OutboxEntry.objects.count() == 0
            assert _stats().pending == 0
        assert _stats().pending == 1
        assert tasks.add.get_result(result.id).status == TaskResultStatus.READY


def test_immediate_mode_admits_inside_the_transaction(task_namespace: str) -> None:
    with override_settings(
        TASKS={"default": {**_tasks(), "OPTIONS": {"TRANSACTIONS": "immediate"}}}
    ):
        with pytest.raises(RuntimeError), transaction.atomic():
            tasks.add.enqueue(1, 1)
            assert _stats().pending == 1
            raise RuntimeError("rolled back, yet the task is there")
        assert _stats().pending == 1


def test_the_checks_refuse_a_bad_mode_and_warn_of_old_rows(task_namespace: str) -> None:
    with override_settings(TASKS={"default": {**_tasks(), "OPTIONS": {"TRANSACTIONS": "later"}}}):
        ids = [message.id for message in check_tasks()]
        assert "django_ledger.E065" in ids
    for delivery, refused in (("later", True), ("inline", False), ("background", False)):
        options = {"OUTBOX_DELIVERY": delivery}
        with override_settings(TASKS={"default": {**_tasks(), "OPTIONS": options}}):
            found = [m for m in check_tasks() if m.id == "django_ledger.E065"]
            assert bool(found) is refused
            if refused:
                assert "OUTBOX_DELIVERY must be one of 'background', 'inline'" in found[0].msg
    with override_settings(TASKS={"default": {**_tasks(), "OPTIONS": {"OUTBOX_MAX_AGE": 60}}}):
        assert check_outbox(databases=["default"]) == []
        OutboxEntry.objects.create(id="old-1", backend="default", queue="default", payload="{}")
        from datetime import timedelta

        from django.utils import timezone

        OutboxEntry.objects.update(created_at=timezone.now() - timedelta(minutes=5))
        found = check_outbox(databases=["default"])
        assert [message.id for message in found] == ["django_ledger.W065"]
        assert isinstance(found[0], checks.Warning)
        assert "1 task(s)" in found[0].msg
        assert check_outbox() == []  # without --database, no database is read


def test_get_result_of_an_unknown_id_inside_an_event_loop_does_not_exist(
    task_namespace: str,
) -> None:
    # Django's own task tests call it so: synchronously, with an event loop running.
    async def look() -> None:
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result("never-enqueued")

    asyncio.run(look())


def _rows(queue: str, count: int, prefix: str, age: timedelta, **fields: Any) -> list[OutboxEntry]:
    """Rows as a committer that died left them, ``age`` ago, oldest first."""
    at = timezone.now() - age
    return [
        OutboxEntry(
            id=f"{prefix}-{n}",
            backend="default",
            queue=queue,
            payload=_payload(n),
            created_at=at + timedelta(microseconds=n),
            **fields,
        )
        for n in range(count)
    ]


@pytest.mark.parametrize("why", ["full", "unconfigured"])
def test_rows_the_relay_keeps_do_not_hold_back_newer_ones(task_namespace: str, why: str) -> None:
    from tests.support.tasks_helpers import task_settings

    queue = "emails" if why == "full" else "not-here"
    with task_settings(task_namespace, emails={"MAX_RECORDS": 1}):
        if why == "full":
            queues.get("emails").ledger.admit("filler", _payload(0))
        OutboxEntry.objects.bulk_create(_rows(queue, 25, "held", timedelta(minutes=5)))
        OutboxEntry.objects.bulk_create(_rows("default", 1, "newer", timedelta(minutes=4)))
        relay = Relay(["default"], batch=10)
        assert relay.run_once() == 1  # behind 25 rows it keeps, in batches of 10
        assert _stats().pending == 1
        assert OutboxEntry.objects.filter(queue=queue).count() == 25
        OutboxEntry.objects.bulk_create(_rows("default", 3, "later", timedelta(minutes=3)))
        assert relay.beat() == relay.interval  # the walk reached the end
        assert _stats().pending == 4
        assert OutboxEntry.objects.count() == 25


def test_a_malformed_row_is_dropped_and_the_rest_of_its_batch_delivered(
    task_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    from io import StringIO

    from django.core.management import call_command

    old = timedelta(minutes=5)
    OutboxEntry.objects.bulk_create(
        [
            *_rows("default", 1, "negative-delay", old, delay_ms=-5),
            *_rows("default", 1, "priority-500", old, priority=500),
            *_rows("default", 2, "good", old),
        ]
    )
    out = StringIO()
    call_command("ledger_relay", stdout=out)  # exits 0
    assert "delivered 4 task(s)" in out.getvalue()
    assert not OutboxEntry.objects.exists()
    assert _stats().pending == 2
    assert "'negative-delay-0'" in caplog.text and "'priority-500-0'" in caplog.text
    assert "rows are dropped" in caplog.text


def test_a_running_relay_leaves_young_rows_to_their_committer(task_namespace: str) -> None:
    from django_ledger.services.relay import worker_relay

    OutboxEntry.objects.bulk_create(_rows("default", 2, "left", timedelta(minutes=1)))
    OutboxEntry.objects.bulk_create(_rows("default", 3, "on-their-way", timedelta(0)))
    relay = worker_relay(burst=False)  # what ledger_worker beats beside repair
    assert relay is not None
    relay.beat()
    assert _stats().pending == 2
    assert OutboxEntry.objects.filter(id__startswith="on-their-way").count() == 3
    assert relay.run_once() == 3  # a drain (ledger_relay, --burst) takes every row
    assert _stats().pending == 5


def test_a_row_goes_only_to_the_redis_and_namespace_it_was_written_for(
    task_namespace: str, fresh_redis: RedisServer
) -> None:
    from tests.support.tasks_helpers import ledger_settings_for

    theirs = ledger_settings_for(task_namespace)
    theirs["CONNECTION"] = fresh_redis.url  # another deployment, sharing this database
    with override_settings(LEDGER=theirs):
        fresh_redis.stop()
        with transaction.atomic():
            result = tasks.add.enqueue(3, 4)  # committed; their Redis is away: the row waits
    assert Relay(["default"]).run_once() == 0  # this deployment's relay leaves it
    with override_settings(LEDGER=ledger_settings_for("another-namespace")):
        assert Relay(["default"]).run_once() == 0  # so does one of another namespace
    assert OutboxEntry.objects.filter(pk=result.id).exists()
    assert _stats().pending == 0
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)  # not this deployment's task
    with pytest.raises(TaskIdConflict, match="another Redis or namespace"), transaction.atomic():
        enqueue_once(tasks.add, result.id, 3, 4)
    with override_settings(LEDGER=theirs):
        assert tasks.add.get_result(result.id).status == TaskResultStatus.READY
        fresh_redis.restart()
        assert Relay(["default"]).run_once() == 1
        assert queues.get("default").ledger.stats().pending == 1
    assert not OutboxEntry.objects.exists()


def test_rows_written_before_rows_had_a_target_are_delivered(task_namespace: str) -> None:
    OutboxEntry.objects.bulk_create(_rows("default", 2, "before", timedelta(minutes=1)))
    assert set(OutboxEntry.objects.values_list("target", flat=True)) == {""}
    assert tasks.add.get_result("before-0").status == TaskResultStatus.READY
    assert Relay(["default"]).run_once() == 2
    assert _stats().pending == 2
