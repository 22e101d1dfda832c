"""An enqueue carries the current OpenTelemetry trace into the record; the run continues it.

The SDK's in-memory exporter on the process's tracer provider; the worker runtime runs
in-process (``Worker`` with the tasks' ``TaskHandler``, burst mode), as
``tests/worker/test_worker_tracing.py`` runs it. Inside ``transaction.atomic()`` the
outbox row keeps the trace until the commit admits it.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from django_ledger.core.worker import Worker, WorkerConfig
from django_ledger.models import OutboxEntry
from django_ledger.queues import queues
from django_ledger.tasks import enqueue_many
from django_ledger.tasks.handler import TaskHandler
from tests.support.tasks_app import tasks

pytest_plugins = ["tests.support.tasks_fixtures", "tests.support.tracing_fixtures"]


def traceparent_of(span: trace.Span) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def stored_trace(request_id: str) -> str | None:
    record = queues.get("default").ledger.resolve(request_id)
    assert record is not None
    return record.traceparent


def run_burst() -> int:
    ledger = queues.get("default").ledger
    config = WorkerConfig(burst=True, repair=False, concurrency=1)
    worker = Worker(
        {"default": ledger}, {"default": TaskHandler("default")}, {"default": 30.0}, config
    )
    return worker.run()


def test_a_task_enqueued_in_a_span_runs_in_a_child_span_of_it(
    spans: InMemorySpanExporter, task_namespace: str
) -> None:
    tracer = trace.get_tracer("shop.views")
    with tracer.start_as_current_span("checkout") as view:
        result = tasks.add.enqueue(2, 3)
        (other,) = enqueue_many(tasks.add, [((1, 1), {})])
    untraced = tasks.add.enqueue(4, 4)
    assert stored_trace(result.id) == traceparent_of(view)
    assert stored_trace(other.id) == traceparent_of(view)
    assert stored_trace(untraced.id) is None  # no span current: nothing stored

    assert run_burst() == 0
    runs = {
        (span.attributes or {})["ledger.request_id"]: span
        for span in spans.get_finished_spans()
        if span.kind is trace.SpanKind.CONSUMER
    }
    assert set(runs) == {result.id, other.id, untraced.id}
    checkout = view.get_span_context()
    for request_id in (result.id, other.id):
        parent = runs[request_id].parent
        assert parent is not None
        assert (parent.trace_id, parent.span_id) == (checkout.trace_id, checkout.span_id)
    assert runs[untraced.id].parent is None
    assert tasks.add.get_result(result.id).return_value == 5


@pytest.mark.django_db(transaction=True)
def test_the_outbox_row_keeps_the_trace_until_the_commit_admits_it(
    spans: InMemorySpanExporter, task_namespace: str
) -> None:
    tracer = trace.get_tracer("shop.views")
    with tracer.start_as_current_span("checkout") as view, transaction.atomic():
        result = tasks.add.enqueue(2, 3)
        row = OutboxEntry.objects.get(pk=result.id)
        assert row.traceparent == traceparent_of(view)
    assert OutboxEntry.objects.count() == 0  # delivered on commit
    assert stored_trace(result.id) == traceparent_of(view)


def test_without_opentelemetry_nothing_is_stored(
    spans: InMemorySpanExporter, task_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_ledger.core.worker import tracing

    monkeypatch.setattr(tracing, "_trace", None)  # as when the import failed
    with trace.get_tracer("shop.views").start_as_current_span("checkout"):
        result = tasks.add.enqueue(2, 3)
    assert stored_trace(result.id) is None
