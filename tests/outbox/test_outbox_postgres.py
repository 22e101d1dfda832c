"""The outbox and fenced effects on PostgreSQL: a private cluster (``tests/support/postgres_server.py``).

The cluster joins the suite's databases as alias ``pg`` (migrated once per module), and
the test backend's ``DATABASE`` option names it, so that enqueues inside
``transaction.atomic(using="pg")`` stage there. Through Django's public task API.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connections, transaction
from django.test import override_settings

from django_ledger.models import OutboxEntry, TaskEffect
from django_ledger.outbox.tables import forget_tables
from django_ledger.queues import queues
from django_ledger.services.relay import Relay
from django_ledger.tasks import LedgerTaskContext, StaleAttempt, enqueue_many, flush_outbox
from django_ledger.tasks.compat import TaskResultDoesNotExist, TaskResultStatus
from tests.support import outbox_tasks
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed, wait_until

if TYPE_CHECKING:
    from tests.support.postgres_server import PostgresServer
    from tests.support.redis_server import RedisServer

pytest_plugins = ["tests.support.tasks_fixtures", "tests.support.postgres_server"]

PG = "pg"


@pytest.fixture(scope="module")
def pg_alias(postgres_server: PostgresServer, django_db_blocker: Any) -> Iterator[str]:
    """Alias ``pg`` for the private cluster, migrated; removed at the end."""
    from django.core.management import call_command

    settings.DATABASES[PG] = postgres_server.database()
    connections.__dict__.pop("settings", None)  # a cached property: read DATABASES again
    with django_db_blocker.unblock():
        call_command("migrate", database=PG, verbosity=0)
    forget_tables()
    try:
        yield PG
    finally:
        with django_db_blocker.unblock():
            connections[PG].close()
        del settings.DATABASES[PG]
        connections.__dict__.pop("settings", None)
        forget_tables()


@pytest.fixture(params=["inline", "background"])
def on_pg(
    request: pytest.FixtureRequest, pg_alias: str, task_namespace: str, django_db_blocker: Any
) -> Iterator[str]:
    """The backend's outbox on ``pg``, in the test's namespace; the test's rows removed after.

    Once with each ``OUTBOX_DELIVERY``: ``background`` hands the committed rows to the
    courier thread, which the tests wait on (``_delivered``) before they look.
    """
    options = {"DATABASE": pg_alias, "OUTBOX_DELIVERY": request.param}
    backend = {**settings.TASKS["default"], "OPTIONS": options}
    with django_db_blocker.unblock(), override_settings(TASKS={"default": backend}):
        yield task_namespace
        assert flush_outbox(30)
        for model in (OutboxEntry, TaskEffect, Group):
            model.objects.using(pg_alias).all().delete()


def _pending() -> int:
    return queues.get("default").ledger.stats().pending


def _delivered() -> None:
    """Wait for the courier (``background``); inline, the commit delivered already."""
    assert flush_outbox(30)


def test_a_rolled_back_transaction_leaves_no_task(on_pg: str) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using=PG):
        result = tasks.add.enqueue(1, 2)
        assert OutboxEntry.objects.using(PG).filter(pk=result.id).exists()
        assert tasks.add.get_result(result.id).status == TaskResultStatus.READY
        raise RuntimeError("roll back")
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)
    assert _pending() == 0
    assert not OutboxEntry.objects.using(PG).exists()
    assert run_claimed() is None


def test_a_committed_task_is_admitted_once(on_pg: str) -> None:
    with transaction.atomic(using=PG):
        result = tasks.add.enqueue(2, 3)
        assert _pending() == 0  # a worker sees nothing before the commit
    _delivered()
    assert _pending() == 1
    assert not OutboxEntry.objects.using(PG).exists()
    assert Relay([PG]).run_once() == 0  # nothing left behind
    ran = run_claimed()
    assert ran is not None and ran[0].claim.request_id == result.id
    assert run_claimed() is None
    assert tasks.add.get_result(result.id).return_value == 5


def test_redis_down_at_commit_keeps_the_rows_for_the_relay(
    on_pg: str, fresh_redis: RedisServer
) -> None:
    from tests.support.tasks_helpers import ledger_settings_for

    ledger = ledger_settings_for(on_pg)
    ledger["CONNECTION"] = fresh_redis.url
    with override_settings(LEDGER=ledger):
        fresh_redis.stop()
        with transaction.atomic(using=PG):
            results = [tasks.add.enqueue(n, 1) for n in range(3)]
        _delivered()  # the courier tried, and kept them
        assert OutboxEntry.objects.using(PG).count() == 3
        assert tasks.add.get_result(results[0].id).status == TaskResultStatus.READY
        fresh_redis.restart()
        assert Relay([PG]).run_once() == 3
        assert _pending() == 3
        assert not OutboxEntry.objects.using(PG).exists()


def test_two_relays_and_the_committer_racing_admit_each_once(on_pg: str) -> None:
    count = 400
    committed = threading.Event()
    stop = threading.Event()
    errors: list[BaseException] = []

    def relay() -> None:
        try:
            committed.wait(30)
            relay = Relay([PG], batch=25)
            while not stop.is_set():  # until the committer's delivery has ended
                relay.run_once()
        except BaseException as exc:  # pragma: no cover - shown by the assert
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=relay) for _ in range(2)]
    for thread in threads:
        thread.start()
    with transaction.atomic(using=PG):
        # Registered before the committer's delivery, so it runs first: the relays start
        # as the commit lands and race the committer's own delivery of the same rows.
        transaction.on_commit(committed.set, using=PG)
        results = enqueue_many(tasks.add, [((n, n), {}) for n in range(count)])
    _delivered()
    stop.set()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert not OutboxEntry.objects.using(PG).exists()
    assert _pending() == count  # each admitted once: the others answered DUPLICATE
    claimed = set()
    while (ran := run_claimed()) is not None:
        claimed.add(ran[0].claim.request_id)
    assert claimed == {result.id for result in results}


def _context(result: Any, fence: int) -> LedgerTaskContext:
    return LedgerTaskContext(task_result=result, fence=fence, max_attempts=3)


def test_a_stale_attempts_effects_are_refused(on_pg: str) -> None:
    result = outbox_tasks.fenced_write.enqueue("stale")
    assert outbox_tasks.fenced_write.call(_context(result, 7), "stale") == {"wrote": "stale"}
    with pytest.raises(StaleAttempt, match="fence 5 is lower than the fence 7"):
        outbox_tasks.fenced_write.call(_context(result, 5), "stale")
    assert Group.objects.using(PG).filter(name__startswith="stale:").count() == 1
    row = TaskEffect.objects.using(PG).get(pk=result.id)
    assert (row.fence, row.done) == (7, True)


def test_a_done_tasks_retry_skips_the_body(on_pg: str) -> None:
    ledger = queues.get("default").ledger
    result = outbox_tasks.fenced_write.enqueue("killed")
    claim = ledger.claim("worker-dead", 0.05)  # its worker commits the effects, then dies
    assert claim is not None
    outbox_tasks.RUNS.clear()
    outbox_tasks.fenced_write.call(_context(result, claim.fence), "killed")
    wait_until(lambda: (ledger.repair(), ledger.stats().pending_due)[1] == 1)
    ran = run_claimed()
    assert ran is not None and ran[0].claim.fence > claim.fence
    assert outbox_tasks.RUNS == ["killed"]  # the body did not run again
    done = outbox_tasks.fenced_write.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == {"wrote": "killed"}
    assert Group.objects.using(PG).filter(name__startswith="killed:").count() == 1


def test_a_conflicting_id_writes_nothing_and_a_savepoints_rows_are_checked(on_pg: str) -> None:
    from django_ledger.tasks import enqueue_once
    from django_ledger.tasks.exceptions import TaskIdConflict

    with transaction.atomic(using=PG):
        enqueue_once(tasks.add, "pg-order:add", 1, 1)
        with pytest.raises(TaskIdConflict):
            enqueue_many(tasks.add, [((5, 5), {}), ((2, 2), {})], ids=["pg-fresh", "pg-order:add"])
        assert list(OutboxEntry.objects.using(PG).values_list("id", flat=True)) == ["pg-order:add"]
        with pytest.raises(RuntimeError), transaction.atomic(using=PG):
            dropped = tasks.add.enqueue(9, 9)
            raise RuntimeError("roll the savepoint back")
        with transaction.atomic(using=PG):
            kept = tasks.add.enqueue(8, 8)
    _delivered()
    assert _pending() == 2 and not OutboxEntry.objects.using(PG).exists()
    ran = {run_claimed()[0].claim.request_id for _ in range(2)}  # type: ignore[index]
    assert ran == {"pg-order:add", kept.id}
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(dropped.id)


def test_a_rolled_back_savepoints_once_id_gives_way_to_the_committed_call(on_pg: str) -> None:
    from django_ledger.tasks import enqueue_once

    with transaction.atomic(using=PG):
        tasks.add.enqueue(0, 0)  # the transaction's callback, registered outside the savepoint
        with pytest.raises(RuntimeError), transaction.atomic(using=PG):
            enqueue_once(tasks.add, "pg-order-1:receipt", 1, 1)
            raise RuntimeError("roll the savepoint back")
        committed = enqueue_once(tasks.add, "pg-order-1:receipt", 20, 22)
    _delivered()
    assert _pending() == 2 and not OutboxEntry.objects.using(PG).exists()
    record = queues.get("default").ledger.resolve(committed.id)
    assert record is not None and "[20,22]" in record.payload


def test_get_result_with_the_database_down_reads_redis_alone(on_pg: str) -> None:
    result = tasks.add.enqueue(2, 2)  # admitted at once: no transaction
    with pytest.raises(TaskResultDoesNotExist):  # the outbox is looked at, and seen
        tasks.add.get_result("never-enqueued-pg")
    database = connections[PG].settings_dict
    port = database["PORT"]
    connections[PG].close()
    database["PORT"] = str(int(port) + 1)  # no server there: every connection fails
    try:
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result("never-enqueued-pg")
        assert tasks.add.get_result(result.id).status == TaskResultStatus.READY
    finally:
        connections[PG].close()
        database["PORT"] = port


def test_a_row_goes_only_to_the_redis_it_was_written_for(
    on_pg: str, fresh_redis: RedisServer
) -> None:
    from tests.support.tasks_helpers import ledger_settings_for

    theirs = ledger_settings_for(on_pg)
    theirs["CONNECTION"] = fresh_redis.url  # another deployment, sharing this database
    with override_settings(LEDGER=theirs):
        fresh_redis.stop()
        with transaction.atomic(using=PG):
            result = tasks.add.enqueue(3, 4)  # committed; their Redis is away: the row waits
        _delivered()
    assert Relay([PG]).run_once() == 0  # this deployment's relay leaves it
    assert OutboxEntry.objects.using(PG).filter(pk=result.id).exists()
    assert _pending() == 0
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)
    with override_settings(LEDGER=theirs):
        fresh_redis.restart()
        assert Relay([PG]).run_once() == 1
        assert queues.get("default").ledger.stats().pending == 1
    assert not OutboxEntry.objects.using(PG).exists()


def test_rows_the_relay_keeps_do_not_hold_back_newer_ones(on_pg: str) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from django_ledger.core.jobs import encode_task

    at = timezone.now() - timedelta(minutes=5)
    payload = encode_task("tests.support.tasks_app.tasks.add", [1, 1], {})
    rows = [
        OutboxEntry(
            id=f"held-{n}", backend="default", queue="not-here", payload=payload, created_at=at
        )  # one created_at: enqueue_many's rows share theirs
        for n in range(25)
    ]
    rows.append(
        OutboxEntry(
            id="newer",
            backend="default",
            queue="default",
            payload=payload,
            created_at=at + timedelta(seconds=1),
        )
    )
    OutboxEntry.objects.using(PG).bulk_create(rows)
    assert Relay([PG], batch=10).run_once() == 1
    assert _pending() == 1
    assert OutboxEntry.objects.using(PG).count() == 25
