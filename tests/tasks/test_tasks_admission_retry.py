"""An enqueue whose admission met Redis away: retried under its id, or an error that says so.

The id is made before the call, and admission by id is idempotent, so ``enqueue`` tries
the admission again (3 tries in all, when the client retries nothing itself): a try
after one that Redis applied answers the call's own record, and the task is enqueued
once. When Redis stays away, the error carries the ids, and ``enqueue_once`` under them
admits each at most once. A real redis-server of the test's own, paused and killed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_ledger import LedgerUnavailable, get_ledger
from django_ledger.tasks import EnqueueOutcomeUnknown, enqueue_many, enqueue_once
from django_ledger.tasks.admission import client_retries
from django_ledger.tasks.compat import task_enqueued
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import wait_until


class Retries(logging.Handler):
    """The warnings an enqueue logs for each try that met Redis away."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.seen.set()


@pytest.fixture
def retries() -> Iterator[Retries]:
    handler = Retries()
    logger = logging.getLogger("django_ledger.tasks")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def own_redis(settings: Any, fresh_redis: RedisServer, namespace: str) -> RedisServer:
    """``LEDGER`` on a redis-server of the test's own, with short socket time-outs."""
    settings.LEDGER = {
        **settings.LEDGER,
        "CONNECTION": fresh_redis.url,
        "NAMESPACE": namespace,
        "TIMEOUTS": {"CONNECT": 1, "SOCKET": 0.5},
    }
    tasks.echo.enqueue("warm")  # the scripts are loaded and the layout checked
    return fresh_redis


def total() -> int:
    return get_ledger("default").stats().total


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "reference"])
def test_an_enqueue_whose_reply_was_lost_is_enqueued_once(
    settings: Any, own_redis: RedisServer, retries: Retries, optimized: bool
) -> None:
    if not optimized:  # the reference path: the same queue, OPTIMIZED off
        queues = {**settings.LEDGER["QUEUES"], "default": {"OPTIMIZED": False}}
        settings.LEDGER = {**settings.LEDGER, "QUEUES": queues}
    assert get_ledger("default").optimized is optimized
    sent: list[Any] = []

    def receiver(sender: type, task_result: Any, **kwargs: Any) -> None:
        sent.append(task_result)

    outcome: dict[str, Any] = {}

    def enqueue() -> None:
        try:
            outcome["result"] = tasks.echo.enqueue("once")
        except Exception as exc:  # an enqueue that gave up on the time-out
            outcome["error"] = exc

    task_enqueued.connect(receiver, weak=False)
    own_redis.pause()  # the call goes out, and its reply never comes: a time-out
    try:
        thread = threading.Thread(target=enqueue)
        thread.start()
        wait_until(lambda: retries.seen.is_set() or not thread.is_alive())
    finally:
        own_redis.resume()  # the paused server now runs what waited, the first try too
        thread.join(30)
        task_enqueued.disconnect(receiver)
    assert "error" not in outcome, outcome
    result = outcome["result"]
    assert total() == 2  # the warm-up and this one: admitted once, however many tries
    assert tasks.echo.get_result(result.id).args == ["once"]
    assert "try 1 of 3" in retries.messages[0] and result.id in retries.messages[0]
    assert [r.id for r in sent if r.args == ["once"]] == [result.id]


@pytest.mark.parametrize("how", ["enqueue", "enqueue_many"])
def test_redis_away_through_every_try_says_which_ids_may_be_enqueued(
    own_redis: RedisServer, retries: Retries, how: str
) -> None:
    own_redis.kill()
    with pytest.raises(LedgerUnavailable) as caught:
        if how == "enqueue":
            tasks.echo.enqueue("lost?")
        else:
            enqueue_many(tasks.echo, [(("lost?",), {}), (("lost?",), {"n": 2})])
    error = caught.value
    assert isinstance(error, EnqueueOutcomeUnknown)
    assert len(error.task_ids) == (1 if how == "enqueue" else 2)
    assert "3 tries" in str(error) and error.task_ids[0] in str(error)
    assert len(retries.messages) == 2  # tries 1 and 2 each logged before the next
    own_redis.restart()
    again = [enqueue_once(tasks.echo, task_id, "lost?") for task_id in error.task_ids[:1]]
    assert [r.id for r in again] == error.task_ids[:1]
    assert enqueue_once(tasks.echo, error.task_ids[0], "lost?").id == error.task_ids[0]
    assert total() == 2  # the warm-up and the one enqueued again: once


def test_a_client_that_retries_on_its_own_is_left_to_its_policy(redis_server: RedisServer) -> None:
    assert client_retries(redis.Redis.from_url(redis_server.url)) == 0  # LEDGER's own client
    assert client_retries(redis.Redis.from_url(redis_server.url, retry=Retry(NoBackoff(), 2))) == 2
