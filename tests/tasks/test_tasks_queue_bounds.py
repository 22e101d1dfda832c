"""Queue groups bound which code runs: a worker runs only its queue's tasks, and a payload
may only tighten the declared and queue limits (time-out, lease, attempts, backoff).

Through ``TaskHandler`` in-process (claims from the ledger, settled as a worker would),
then through a real ``ledger_worker``. A refusal ends FAILED, nothing run, with why as
the attempt's error.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_ledger import get_ledger
from django_ledger.core.jobs import encode_task
from django_ledger.core.records import State
from django_ledger.core.worker.handler import Job, Outcome
from django_ledger.tasks.compat import TaskResultStatus
from django_ledger.tasks.handler import TaskHandler, TaskPlan
from django_ledger.tasks.options import PAYLOAD_BACKOFF_MOST, TaskRefused
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import tasks, tenancy
from tests.support.tasks_helpers import run_burst, task_settings

pytest_plugins = ["tests.support.tasks_fixtures"]

EMAILS_ONLY = "tests.support.tasks_app.tenancy.emails_only"
BOTH = "tests.support.tasks_app.tenancy.both"
BOUNDED = "tests.support.tasks_app.tenancy.bounded"
HUNDRED_YEARS = 100 * 365 * 86_400


def claimed(queue: str, payload: str, request_id: str = "p-1") -> Job:
    ledger = get_ledger(queue)
    assert ledger.admit(request_id, payload).accepted
    claim = ledger.claim("w", 30)
    assert claim is not None
    return Job(claim=claim, queue=queue, worker_id="w", started_at=claim.lease_until - 30_000)


def plan_of(queue: str, payload: str) -> TaskPlan:
    plan = TaskHandler(queue).plan(claimed(queue, payload))
    assert isinstance(plan, TaskPlan)
    return plan


def refusal(queue: str, payload: str) -> TaskRefused:
    with pytest.raises(TaskRefused) as raised:
        TaskHandler(queue).plan(claimed(queue, payload))
    return raised.value


# -- queues -------------------------------------------------------------------------------


def test_a_task_of_another_queue_is_refused(task_namespace: str) -> None:
    refused = refusal("default", encode_task(EMAILS_ONLY, [1], {}))
    assert isinstance(refused, ValueError)
    assert "declared for queue(s) 'emails', not 'default'" in str(refused)
    assert plan_of("emails", encode_task(EMAILS_ONLY, [1], {})).name == EMAILS_ONLY


def test_a_task_declared_for_several_queues_runs_in_each_and_no_other(
    task_namespace: str,
) -> None:
    assert tenancy.both.queues == ("emails", "reports")
    for queue in ("emails", "reports"):
        assert plan_of(queue, encode_task(BOTH, [1], {})).name == BOTH
    assert "'emails', 'reports', not 'default'" in str(
        refusal("default", encode_task(BOTH, [1], {}))
    )


def test_a_refusal_settles_failed_with_why_and_runs_nothing(task_namespace: str) -> None:
    handler = TaskHandler("default")
    job = claimed("default", encode_task(EMAILS_ONLY, [7], {}), "tenant-b")
    with pytest.raises(TaskRefused) as raised:
        handler.plan(job)
    outcome = handler.refused(job, raised.value)
    assert isinstance(outcome, Outcome) and outcome.state is State.FAILED
    ledger = get_ledger("default")
    assert ledger.settle(job.claim, outcome.state, outcome.delay, outcome.result).ok
    failed = tenancy.emails_only.get_result("tenant-b")
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 1
    assert failed.errors[0].exception_class is TaskRefused
    assert "not 'default'" in failed.errors[0].traceback
    assert not ledger.redis.exists(f"{task_namespace}:emails_only-ran")


# -- options: a payload may only tighten ----------------------------------------------


def test_the_declared_limits_hold_without_payload_options(task_namespace: str) -> None:
    plan = plan_of("default", encode_task(BOUNDED, [], {}))
    assert (plan.timeout, plan.lease) == (2.0, 3.0)
    assert plan.options is not None and plan.options.max_attempts == 3


@pytest.mark.parametrize(
    ("options", "seen"),
    [
        ({"timeout": 1}, ("timeout", 1.0)),
        ({"lease": 1}, ("lease", 1.0)),
        ({"max_attempts": 2}, ("max_attempts", 2)),
        ({"backoff_base": 0.75}, ("backoff_base", 0.75)),
        ({"backoff_cap": 60}, ("backoff_cap", 60.0)),
        ({"retry_on": ["ConnectionError"]}, ("retry_on", ("builtins.ConnectionError",))),
    ],
)
def test_a_payload_may_tighten_a_limit(
    task_namespace: str, options: dict[str, Any], seen: tuple[str, Any]
) -> None:
    plan = plan_of("default", encode_task(BOUNDED, [], {}, options))
    assert plan.options is not None
    values = {
        "timeout": plan.timeout,
        "lease": plan.lease,
        "max_attempts": plan.options.max_attempts,
        "backoff_base": plan.options.backoff.base,
        "backoff_cap": plan.options.backoff.cap,
        "retry_on": plan.options.retry_on,
    }
    assert values[seen[0]] == seen[1]


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"timeout": 0}, "timeout=0.0 loosens what the task and its queue allow (more than 0"),
        ({"timeout": 2.5}, "at most 2 s"),
        ({"lease": HUNDRED_YEARS}, "lease="),
        (
            {"max_attempts": 4},
            "max_attempts=4 loosens what the task and its queue allow (at most 3)",
        ),
        ({"backoff_base": 0.1}, "backoff_base=0.1"),
        ({"backoff_cap": PAYLOAD_BACKOFF_MOST + 1}, "from 1 s to 86400 s"),
        ({"retry_on": ["BaseException"]}, "retry_on"),
        ({"retry_on": ["shop.errors.Gone"]}, "within ['builtins.Exception']"),
    ],
)
def test_a_payload_that_loosens_a_limit_is_refused(
    task_namespace: str, options: dict[str, Any], why: str
) -> None:
    refused = refusal("default", encode_task(BOUNDED, [], {}, options))
    assert why in str(refused) and "a payload may only tighten them" in str(refused)


def test_the_queues_lease_bounds_a_payload_of_a_task_that_declares_none(
    task_namespace: str,
) -> None:
    payload = encode_task(tasks.add.module_path, [1, 2], {}, {"lease": HUNDRED_YEARS})
    assert "at most 30 s" in str(refusal("default", payload))


def test_a_payload_may_not_lift_a_queues_timeout(namespace: str) -> None:
    with task_settings(namespace, default={"TIMEOUT": 5}):
        payload = encode_task(tasks.add.module_path, [1, 2], {}, {"timeout": 0})
        assert "at most 5 s" in str(refusal("default", payload))
        kept = encode_task(tasks.add.module_path, [1, 2], {}, {"timeout": 4})
        assert TaskHandler("default").plan(claimed("default", kept, "p-2")).timeout == 4.0


# -- through a real worker -------------------------------------------------------------


def default_backend() -> Any:
    from django_ledger.tasks.compat import task_backends

    return task_backends["default"]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> RedisServer:
    from tests.support.redis_plugin import session_server

    return session_server(request.config)


def test_a_worker_runs_only_its_queues_tasks_within_their_limits(
    server: RedisServer, task_namespace: str
) -> None:
    default, reports = get_ledger("default"), get_ledger("reports")
    refused = {
        "other-queue": encode_task(EMAILS_ONLY, [1], {}),
        "no-timeout": encode_task(BOUNDED, [], {}, {"timeout": 0}),
        "long-lease": encode_task(BOUNDED, [], {}, {"lease": HUNDRED_YEARS}),
    }
    for request_id, payload in refused.items():
        assert default.admit(request_id, payload).accepted
    assert default.admit("tightened", encode_task(BOUNDED, [1, 2], {}, {"timeout": 1})).accepted
    assert reports.admit("declared", encode_task(BOTH, [9], {})).accepted
    output = run_burst(server.url, task_namespace, "default", "reports")
    for request_id in refused:
        failed = default_backend().get_result(request_id)
        assert failed.status == TaskResultStatus.FAILED and failed.attempts == 1, output
        assert failed.errors[0].exception_class is TaskRefused
        assert "a payload may only tighten" in failed.errors[0].traceback or (
            "not 'default'" in failed.errors[0].traceback
        )
        assert f"id={request_id} attempt=1" in output and "reason=refused: " in output
    assert not default.redis.exists(f"{task_namespace}:emails_only-ran")
    assert default_backend().get_result("tightened").return_value == 2
    assert tenancy.both.get_result("declared").return_value == 9
