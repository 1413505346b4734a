"""Tracing with OpenTelemetry, when the application has it (``pip install ".[otel]"``).

Tracing is on while OpenTelemetry's API is importable and the application has set a tracer
provider (``trace.set_tracer_provider``, or ``opentelemetry-instrument``). Otherwise nothing
here imports anything, and each call below is one test of a module variable:

- :func:`traceparent`: the W3C ``traceparent`` of the span current where a job is created
  (the doors stamp it on the job: ``jobs_job.traceparent``), or ``None``;
- :func:`attempt_span`: the span an attempt runs in, ``{type} process`` (kind ``CONSUMER``),
  the child of its creator's span on the job's first attempt and *linked* to it on later ones
  (a retry, or the run after a snooze, is a trace of its own), with the messaging attributes
  (:data:`SYSTEM`, the job id, its queue, the attempt) and, once it ends, its outcome;
- :func:`trace_id`: the trace id of a stored ``traceparent``, for the job page (pure text).

The API is imported on the first call, once per process; an import that fails is not tried
again. The module never configures a provider or an exporter: that is the application's.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SYSTEM = "jobqueue"  # messaging.system
ATTEMPT = "messaging.jobqueue.attempt"
OUTCOME = "messaging.jobqueue.outcome"  # the runtime's End value
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
ERRORS = frozenset({"retried", "failed", "lost", "abandoned"})  # outcomes whose span is an ERROR

_trace: Any = None  # opentelemetry.trace, once imported
_context: Any = None  # opentelemetry.context
_looked = False  # whether the import was tried


def _api() -> Any:
    """``opentelemetry.trace``, or ``None`` when it cannot be imported (tried once)."""
    global _trace, _context, _looked
    if not _looked:
        try:
            _trace = importlib.import_module("opentelemetry.trace")
            _context = importlib.import_module("opentelemetry.context")
        except ImportError:
            _trace = None
        _looked = True
    return _trace


def active() -> bool:
    """Whether spans are made: the API is there and a tracer provider has been set."""
    trace = _trace if _looked else _api()
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, when tracing is on and one is current."""
    if not active():
        return None
    context = _trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def trace_id(stored: str | None) -> str | None:
    """The trace id (32 hex digits) of a stored ``traceparent``; ``None`` for none or a bad one."""
    found = TRACEPARENT.fullmatch(stored) if stored else None
    return found.group(1) if found else None


def _remote(stored: str | None) -> Any:
    """The span context of a stored ``traceparent`` (``None`` for none, or an invalid one)."""
    found = TRACEPARENT.fullmatch(stored) if stored else None
    if found is None:
        return None
    trace = _trace
    context = trace.SpanContext(
        trace_id=int(found.group(1), 16),
        span_id=int(found.group(2), 16),
        is_remote=True,
        trace_flags=trace.TraceFlags(int(found.group(3), 16)),
    )
    return context if context.is_valid else None


@contextmanager
def attempt_span(job: Any) -> Iterator[Any]:
    """Run the block in the attempt's span, current meanwhile (a handler's own spans are its
    children); only while :func:`active`. ``job``: the claimed record (type, id, queue,
    attempts, traceparent). An exception leaving the block is recorded and sets ERROR."""
    trace = _trace
    creator = _remote(job.traceparent)
    empty = _context.Context()
    parent, links = empty, list[Any]()
    if creator is not None:
        if job.attempts <= 1:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(creator), empty)
        else:
            links = [trace.Link(creator)]
    span = trace.get_tracer(__name__).start_span(
        f"{job.type} process",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        links=links,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.message.id": str(job.id),
            "messaging.destination.name": job.queue,
            ATTEMPT: job.attempts,
        },
    )
    with trace.use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True):
        yield span


def record_exception(error: BaseException) -> None:
    """Record a handler's exception on the current span (the attempt's, while tracing is on)."""
    if _trace is not None:
        _trace.get_current_span().record_exception(error)


def outcome(span: Any, end: str | None, error: str = "") -> None:
    """Set how the attempt ended on its span: ``end`` the runtime's ``End`` value, ``None`` for
    a handler's success that the batch completer records after the span (``succeeded``: what
    the handler did); an ERROR status for a failure."""
    end = end or "succeeded"
    span.set_attribute(OUTCOME, end)
    if end in ERRORS:
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, error or end))
    else:
        span.set_status(_trace.Status(_trace.StatusCode.OK))
