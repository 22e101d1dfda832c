"""Run a job inside the trace its record carries, when OpenTelemetry is installed.

``opentelemetry-api`` is optional (the ``otel`` extra): without it ``span`` does nothing.
The record's ``traceparent`` (W3C trace context) becomes the parent of one span per run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["span"]

try:  # pragma: no cover - depends on what is installed
    from opentelemetry import trace as _trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _PROPAGATOR: Any = TraceContextTextMapPropagator()
    _TRACER: Any = _trace.get_tracer("django_ledger.worker")
except ImportError:  # pragma: no cover
    _PROPAGATOR = _TRACER = None


def enabled() -> bool:
    return _TRACER is not None


@contextlib.contextmanager
def span(name: str, traceparent: str | None, attributes: dict[str, Any]) -> Iterator[None]:
    """Run the body in a span named ``name``, child of ``traceparent`` if there is one."""
    if _TRACER is None:
        yield
        return
    context = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
    with _TRACER.start_as_current_span(name, context=context, attributes=attributes):
        yield
