"""``RetryAfter``: a task names when its next attempt runs, within its ``max_attempts``.

In-process attempts (``tasks_helpers.run_claimed``), settled as a worker settles them:
the outcome's delay becomes the record's due time on the Redis clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from django_ledger import get_ledger
from django_ledger.core.records import State
from django_ledger.tasks import RetryAfter
from django_ledger.tasks.compat import TaskResultStatus
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed

pytest_plugins = ["tests.support.tasks_fixtures"]


def test_the_next_attempt_waits_what_the_task_asked_whatever_retry_on_says(
    task_namespace: str,
) -> None:
    # throttled retries only ConnectionError, and backs off at most 2 ms.
    result = tasks.throttled.enqueue(90)
    ran = run_claimed()
    assert ran is not None
    _, outcome, _ = ran
    assert outcome.state is State.PENDING and outcome.delay == 90.0
    record = get_ledger("default").resolve(result.id)
    assert record is not None and record.state is State.PENDING
    assert record.due_at - record.updated_at == 90_000
    seen = tasks.throttled.get_result(result.id)
    assert seen.status == TaskResultStatus.READY
    assert seen.errors[0].exception_class is RetryAfter
    assert "RetryAfter: retry after 90 s: the upstream said 429" in seen.errors[0].traceback


def test_on_the_last_attempt_the_task_fails_with_its_retry_after_recorded(
    task_namespace: str,
) -> None:
    result = tasks.throttled.using(max_attempts=1).enqueue("120")
    ran = run_claimed()
    assert ran is not None and ran[1].state is State.FAILED
    failed = tasks.throttled.get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 1
    assert [e.exception_class for e in failed.errors] == [RetryAfter]


@pytest.mark.parametrize(
    ("wait", "kind", "words"),
    [
        ("soon", ValueError, "RetryAfter needs seconds or an HTTP date, got the text 'soon'"),
        (-1, ValueError, "RetryAfter needs 0 to about 100 years of seconds, got -1"),
        (10**12, ValueError, "RetryAfter needs 0 to about 100 years of seconds"),
        ("-5", ValueError, "RetryAfter needs seconds or an HTTP date, got the text '-5'"),
        ([5], TypeError, "RetryAfter needs a number of seconds, a timedelta"),
    ],
)
def test_a_retry_after_that_is_not_a_time_fails_the_attempt_saying_so(
    task_namespace: str, wait: object, kind: type[Exception], words: str
) -> None:
    result = tasks.throttled.enqueue(wait)
    ran = run_claimed()
    # Not a RetryAfter, and not a ConnectionError: no retry at all.
    assert ran is not None and ran[1].state is State.FAILED
    failed = tasks.throttled.get_result(result.id)
    assert failed.errors[0].exception_class is kind
    assert words in failed.errors[0].traceback


def test_retry_after_reads_what_an_http_header_or_a_time_says() -> None:
    assert RetryAfter("  120 ").seconds == 120.0
    assert RetryAfter(timedelta(minutes=2)).seconds == 120.0
    later = datetime.now(UTC) + timedelta(hours=1)
    assert 3590 < RetryAfter(later).seconds <= 3600
    assert RetryAfter(datetime(2000, 1, 1, tzinfo=UTC)).seconds == 0.0  # past: at once
    assert RetryAfter("Wed, 21 Oct 2015 07:28:00 GMT").seconds == 0.0
    with pytest.raises(ValueError, match="aware datetime"):
        RetryAfter(datetime(2030, 1, 1))
    for endless in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="0 to about 100 years"):
            RetryAfter(endless)
    with pytest.raises(TypeError, match="not bool"):
        RetryAfter(True)
