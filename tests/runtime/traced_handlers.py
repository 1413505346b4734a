"""A worker's application code that sets up OpenTelemetry, as an application does: an SDK
tracer provider whose spans go, one JSON object a line, to the file ``TEST_SPANS_FILE`` names
(the SDK's ConsoleSpanExporter, written at each span's end). Loaded by the worker through
``JOB_HANDLER_MODULES``; its job types make spans of their own and fail on demand."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from dashboard.jobs import JobContext, handler

_out = open(os.environ["TEST_SPANS_FILE"], "a", encoding="utf-8")  # noqa: SIM115  (the process's)
_provider = TracerProvider()
_provider.add_span_processor(
    SimpleSpanProcessor(
        ConsoleSpanExporter(out=_out, formatter=lambda span: span.to_json(indent=None) + "\n")
    )
)
trace.set_tracer_provider(_provider)
tracer = trace.get_tracer("tests.runtime.traced_handlers")


@handler("traced.work")
def work(ctx: JobContext) -> dict[str, Any]:
    """Makes a span of its own inside the attempt's; fails while ``attempt < fail_until``."""
    with tracer.start_as_current_span("inner work"):
        if ctx.attempt < ctx.payload.get("fail_until", 0):
            raise RuntimeError(f"partner down on attempt {ctx.attempt}")
    return {"attempt": ctx.attempt}
