"""A task admitted with a traceparent runs inside that trace (OpenTelemetry installed).

The runtime runs in-process (``Worker`` with a ``CallableHandler``, burst mode) with the
SDK's in-memory exporter on the process's tracer provider; without OpenTelemetry (its
import blocked in a subprocess) the same worker runs untraced.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import pytest
import redis
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from django_ledger import Ledger, State
from django_ledger.core.worker import CallableHandler, Job, Outcome, Worker, WorkerConfig, tracing
from tests.support.redis_server import RedisServer
from tests.support.worker_process import ROOT

pytest_plugins = ["tests.support.tracing_fixtures"]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


def run_burst(ledger: Ledger, func: Any) -> int:
    handler = CallableHandler(func, max_attempts=1)
    config = WorkerConfig(burst=True, repair=False, concurrency=2)
    worker = Worker({ledger.queue: ledger}, {ledger.queue: handler}, {ledger.queue: 30.0}, config)
    return worker.run()


def test_a_task_with_a_traceparent_runs_in_a_child_span_of_it(
    spans: InMemorySpanExporter, redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "traced")
    ledger.admit("order-1042", "x", traceparent=TRACEPARENT)
    ledger.admit("untraced", "x")
    inside: dict[str, Any] = {}

    def send_receipt(job: Job) -> str:
        inside[job.claim.request_id] = trace.get_current_span().get_span_context()
        return "sent"

    assert run_burst(ledger, send_receipt) == 0
    assert ledger.stats().completed == 2
    finished = {span.attributes["ledger.request_id"]: span for span in spans.get_finished_spans()}  # type: ignore[index]
    assert set(finished) == {"order-1042", "untraced"}

    span = finished["order-1042"]
    assert span.parent is not None
    assert (span.parent.trace_id, span.parent.span_id) == (int(TRACE_ID, 16), int(PARENT_ID, 16))
    assert span.context is not None and span.context.trace_id == int(TRACE_ID, 16)
    assert inside["order-1042"] == span.context  # the handler ran inside the span
    assert span.name == send_receipt.__qualname__
    assert span.kind is trace.SpanKind.CONSUMER
    attributes = dict(span.attributes or {})
    assert isinstance(attributes.pop("ledger.fence"), int)
    # Set once the runtime records outcomes on spans (``Traced.outcome``).
    assert attributes.pop("ledger.outcome", "completed") == "completed"
    assert attributes == {
        "ledger.queue": "traced",
        "ledger.request_id": "order-1042",
        "ledger.attempt": 1,
    }
    # Without a traceparent, a trace of its own.
    other = finished["untraced"]
    assert other.parent is None
    assert other.context is not None and other.context.trace_id != int(TRACE_ID, 16)


def test_a_raising_task_is_still_traced(
    spans: InMemorySpanExporter, redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "traced")
    ledger.admit("bad", "x", traceparent=TRACEPARENT)

    def explode(job: Job) -> None:
        raise RuntimeError("no")

    assert run_burst(ledger, explode) == 0
    record = ledger.resolve("bad")
    assert record is not None and record.state is State.FAILED
    (span,) = spans.get_finished_spans()
    assert span.parent is not None and span.parent.trace_id == int(TRACE_ID, 16)


@pytest.mark.parametrize(
    ("outcome", "word", "error"),
    [
        (Outcome(State.COMPLETED), "completed", False),
        (Outcome(State.PENDING, 1.0, reason="builtins.RuntimeError"), "retry", True),
        (Outcome(State.FAILED, reason="builtins.RuntimeError"), "failed", True),
    ],
)
def test_the_span_records_the_outcome(
    spans: InMemorySpanExporter, outcome: Outcome, word: str, error: bool
) -> None:
    with tracing.span("shop.send", TRACEPARENT, {"ledger.queue": "q"}) as traced:
        traced.outcome(outcome)
    (span,) = spans.get_finished_spans()
    assert (span.attributes or {})["ledger.outcome"] == word
    assert (span.status.status_code is StatusCode.ERROR) is error
    if error:
        assert span.status.description == "builtins.RuntimeError"


def test_a_coroutine_task_runs_inside_the_trace(
    spans: InMemorySpanExporter, redis_client: redis.Redis, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "traced")
    ledger.admit("async-1", "x", traceparent=TRACEPARENT)
    inside: list[Any] = []

    async def send(job: Job) -> str:
        await asyncio.sleep(0)
        inside.append(trace.get_current_span().get_span_context())
        return "sent"

    assert run_burst(ledger, send) == 0
    (span,) = spans.get_finished_spans()
    assert inside == [span.context]


#: Run in a subprocess where ``opentelemetry`` cannot be imported.
UNTRACED = """
import os, sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, Blocked())

import redis
from django_ledger.core.ledger import Ledger
from django_ledger.core.worker import CallableHandler, Worker, WorkerConfig, tracing

client = redis.Redis.from_url(os.environ["REDIS_URL"])
ledger = Ledger(client, os.environ["LEDGER_NAMESPACE"], "traced")
ledger.admit("order-1042", "x", traceparent=os.environ["TRACEPARENT"])
handler = CallableHandler(lambda job: "sent", max_attempts=1)
worker = Worker({"traced": ledger}, {"traced": handler}, {"traced": 30.0},
                WorkerConfig(burst=True, repair=False))
code = worker.run()
assert not tracing.enabled()
assert not any(name.startswith("opentelemetry") for name in sys.modules)
print("exit", code, "completed", ledger.stats().completed)
"""


def test_without_opentelemetry_the_worker_runs_untraced(
    redis_server: RedisServer, namespace: str
) -> None:
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "LEDGER_NAMESPACE": namespace,
        "TRACEPARENT": TRACEPARENT,
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", UNTRACED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["exit", "0", "completed", "1"]
