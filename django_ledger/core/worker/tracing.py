"""Run a job inside the trace its record carries, when OpenTelemetry is installed.

``opentelemetry-api`` is optional (the ``otel`` extra): without it ``span`` does nothing.
The record's ``traceparent`` (W3C trace context) becomes the parent of one CONSUMER span
per run, named after the task, with the queue, request id, attempt and fence as
attributes; a record without one starts a trace of its own. Spans go wherever the
process's tracer provider sends them (the API alone drops them: configure the SDK).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Iterator
from typing import Any

from ..records import State
from .handler import Outcome

__all__ = ["Traced", "current_traceparent", "enabled", "span"]

# Imported by name, so the module type-checks the same with and without the extra.
_trace: Any  # the ``opentelemetry.trace`` module, or None
_tracecontext: Any  # ``opentelemetry.trace.propagation.tracecontext``, or None
try:  # pragma: no cover - depends on what is installed
    _trace = importlib.import_module("opentelemetry.trace")
    _tracecontext = importlib.import_module("opentelemetry.trace.propagation.tracecontext")
except ImportError:  # pragma: no cover
    _trace = _tracecontext = None

#: How an outcome reads on its span (the same words as the outcome's log line).
_WORDS = {State.COMPLETED: "completed", State.FAILED: "failed", State.PENDING: "retry"}


def enabled() -> bool:
    """Whether runs are traced (``opentelemetry-api`` imports)."""
    return _trace is not None


@functools.cache
def _tracer() -> Any:
    # A proxy until the application sets its tracer provider, then that provider's.
    return _trace.get_tracer("django_ledger.worker")


@functools.cache
def _propagator() -> Any:
    return _tracecontext.TraceContextTextMapPropagator()


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the span current here, or ``None`` (none, or no OpenTelemetry).

    An enqueue stores it in the record, so the run's span continues the enqueuer's trace.
    """
    if _trace is None:
        return None
    if not _trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _propagator().inject(carrier)
    return carrier.get("traceparent")


class Traced:
    """The span one run is in (nothing without OpenTelemetry)."""

    def __init__(self, current: Any = None) -> None:
        self.current = current

    def outcome(self, outcome: Outcome) -> None:
        """Record how the run settles; a failure or a retry marks the span as an error."""
        if self.current is None:
            return
        word = _WORDS.get(outcome.state, outcome.state.value.lower())
        self.current.set_attribute("ledger.outcome", word)
        if outcome.reason:
            self.current.set_attribute("ledger.reason", outcome.reason)
        if outcome.state is not State.COMPLETED:
            status = _trace.Status(_trace.StatusCode.ERROR, outcome.reason or word)
            self.current.set_status(status)


@contextlib.contextmanager
def span(name: str, traceparent: str | None, attributes: dict[str, Any]) -> Iterator[Traced]:
    """Run the body in a span named ``name``, child of ``traceparent`` if there is one."""
    if _trace is None:
        yield Traced()
        return
    # A stored traceparent was checked at admission; one that does not parse extracts
    # to an empty context, and the run starts a trace of its own.
    context = _propagator().extract({"traceparent": traceparent}) if traceparent else None
    with _tracer().start_as_current_span(
        name, context=context, kind=_trace.SpanKind.CONSUMER, attributes=attributes
    ) as current:
        yield Traced(current)
