"""The tasks the task tests enqueue (module level, as Django requires)."""

from __future__ import annotations

import asyncio
from typing import Any

from django.utils.module_loading import import_string

from django_ledger.tasks import LedgerTaskContext
from django_ledger.tasks import task as ledger_task
from django_ledger.tasks.compat import task


@task
def noop(*args: Any, **kwargs: Any) -> None:
    """Return nothing."""


@task()
def add(a: int, b: int) -> int:
    return a + b


@task
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


@task
def fail(message: str) -> None:
    raise ValueError(message)


@ledger_task(max_attempts=1)
async def async_fail(message: str) -> None:
    raise ValueError(message)


@task
def exit_task() -> None:
    raise SystemExit(3)


@ledger_task(max_attempts=1)
def complex_exception() -> None:
    raise ValueError(ValueError("This task failed"))


@task
def lambda_result() -> Any:
    return lambda: 1


@task
def sized(n: int) -> str:
    return "x" * n


@task(takes_context=True)
def context_of(context: LedgerTaskContext) -> dict[str, Any]:
    return {
        "id": context.task_result.id,
        "attempt": context.attempt,
        "fence": context.fence,
        "max_attempts": context.max_attempts,
        "is_last_attempt": context.is_last_attempt,
    }


@ledger_task(takes_context=True, max_attempts=4, backoff_base=0.001, backoff_cap=0.002)
def flaky(context: LedgerTaskContext, failures: int) -> int:
    """Raise ConnectionError on the first ``failures`` attempts, then return the attempt."""
    if context.attempt <= failures:
        raise ConnectionError(f"attempt {context.attempt} failed")
    attempt: int = context.attempt
    return attempt


@ledger_task(max_attempts=5, backoff_base=0.001, backoff_cap=0.002, retry_on=[ConnectionError])
def picky(kind: str) -> None:
    """Raise the exception class ``kind`` names: only ConnectionError retries."""
    raise import_string(kind)("picky")


@ledger_task(takes_context=True, max_attempts=3, backoff_base=0.001, backoff_cap=0.002)
def always_fails(context: LedgerTaskContext) -> None:
    raise ConnectionError(f"attempt {context.attempt}")


@ledger_task(unique=True)
def unique_add(a: int, b: int) -> int:
    return a + b


@ledger_task(timeout=0.2, max_attempts=2, backoff_base=0.001, backoff_cap=0.002)
async def hangs() -> None:
    """Wait for an event nothing sets: only the time-out ends it."""
    await asyncio.Event().wait()


@task(queue_name="emails")
def on_emails(value: int) -> int:
    return value


@task(takes_context=True)
def claim_order(context: LedgerTaskContext, index: int) -> dict[str, int]:
    """Return the fence of this claim: fences grow in the order tasks were claimed."""
    return {"index": index, "fence": context.fence}


def not_a_task() -> str:
    """A plain function: no payload may make a worker call it."""
    raise AssertionError("a worker called a function that is not a task")


def _impl(value: int) -> int:
    return value


#: Made from ``_impl``, so its module path names the function: no worker could find it.
renamed = task(_impl)


@task
def wait_for_key(key: str) -> str:
    """Block until the test pushes to ``key`` (BLPOP): holds the task RUNNING meanwhile."""
    from django_ledger.conf import connection

    got = connection().blpop([key], timeout=60)
    if got is None:
        raise TimeoutError(f"nothing was pushed to {key!r}")
    value: bytes = got[1]
    return value.decode()


@task
def cyclic_result() -> list[Any]:
    """Return a list that holds itself: no JSON can store it."""
    value: list[Any] = []
    value.append(value)
    return value


@task
def deep_result() -> list[Any]:
    """Return a list nested 100 deep: JSON holds it, but past the ledger's bound."""
    value: list[Any] = []
    for _ in range(100):
        value = [value]
    return value


@task
def usernames() -> list[str]:
    """The users the database holds, as the task's own connection sees them."""
    from django.contrib.auth.models import User

    return sorted(User.objects.values_list("username", flat=True))


@task
def enqueues_add(a: int, b: int) -> list[str]:
    """Enqueue ``add(a, b)`` from inside a task: its id, and its status as seen from here."""
    result = add.enqueue(a, b)
    return [result.id, result.status]


@ledger_task(max_attempts=2, backoff_base=0.001, backoff_cap=0.002, retry_on=[ConnectionError])
def throttled(wait: Any) -> None:
    """Ask for the next attempt ``wait`` from now, as an upstream's Retry-After says."""
    from django_ledger.tasks import RetryAfter

    raise RetryAfter(wait, reason="the upstream said 429")


@ledger_task(unique="until_start")
def until_start(a: int) -> int:
    return a


@ledger_task(unique="until_end")
def until_end(a: int) -> int:
    return a


@ledger_task(unique=60)
def once_a_minute(a: int) -> int:
    return a


@ledger_task(unique="until_start", debounce=5, debounce_max=12)
def debounced(a: int) -> int:
    return a


@ledger_task(debounce=5)
def debounced_not_unique(a: int) -> int:
    return a


@ledger_task(unique=True, debounce=5)
def debounced_once(a: int) -> int:
    return a


def _commands_so_far(client: Any) -> int:
    """Every command the Redis server has run (INFO commandstats), this INFO included."""
    stats = client.info("commandstats")
    return sum(int(entry["calls"]) for entry in stats.values())


@ledger_task(takes_context=True)
def report_progress(context: LedgerTaskContext, steps: int) -> int:
    """Report progress ``steps`` times; return how many commands Redis ran meanwhile."""
    from django_ledger import get_ledger

    client = get_ledger(context.task_result.task.queue_name).redis
    before = _commands_so_far(client)
    for step in range(1, steps + 1):
        context.set_progress(step, steps, note=f"step {step}")
    context.metadata["steps"] = steps
    context.save_metadata()
    return _commands_so_far(client) - before - 1  # the first INFO counts in the second


@ledger_task(takes_context=True)
def progress_then_wait(context: LedgerTaskContext, key: str, total: int) -> str:
    """Report 1 of ``total``, wait for ``key``'s push, report each step then, and end."""
    from django_ledger import get_ledger

    context.set_progress(1, total, note="started")
    context.set_metadata(phase="waiting")
    client = get_ledger(context.task_result.task.queue_name).redis
    while True:
        popped = client.blpop([key], timeout=1)
        if popped is None:
            continue
        value = popped[1].decode()
        if value == "end":
            context.set_progress(total, total, note="finished")
            context.set_metadata(phase="done")
            return value
        context.set_progress(int(value), total, note=f"at {value}")
