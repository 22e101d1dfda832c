"""The tasks of the workflow tests (tests/tasks/test_workflows.py): each leaves a trace in Redis."""

from __future__ import annotations

import json
from typing import Any

from django_ledger import get_ledger
from django_ledger.tasks import task as ledger_task
from django_ledger.tasks.compat import task


def _trace(key: str, value: Any) -> None:
    get_ledger("default").redis.rpush(key, json.dumps(value))


@task
def plus(value: int, more: int = 1) -> int:
    """Return value + more (a chain's step gets the previous result as ``value``)."""
    return value + more


@task
def square(n: int) -> int:
    return n * n


@task
def collect(results: list[Any], key: str) -> int:
    """A chord's callback: record the list of results it got, each call once."""
    _trace(key, results)
    return len(results)


@task
def seen(*inputs: Any, key: str) -> list[Any]:
    """Record that it ran, with the inputs it got."""
    _trace(key, list(inputs))
    return list(inputs)


@ledger_task(max_attempts=1)
def broken(message: str) -> None:
    raise ValueError(message)


@ledger_task(max_attempts=1)
def opens(key: str) -> str:
    """Fail until ``key`` exists (an operator's retry after it is set succeeds)."""
    if not get_ledger("default").redis.exists(key):
        raise ValueError(f"{key} is not there yet")
    return "open"


@task
def hold(key: str) -> None:
    """Block until something is pushed to ``key`` (at most 30 s)."""
    get_ledger("default").redis.blpop([key], timeout=30)


@task
def nested(levels: int) -> list[Any]:
    """Return a list nested ``levels`` deep (``[]`` is 1)."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value
