"""Tracing on in a benchmark worker: an OpenTelemetry SDK tracer provider whose batch span
processor hands every span to an exporter that drops it, so a drain measures what making the
attempts' spans costs the worker, not a collector. Loaded with
``JOB_HANDLER_MODULES=bench.handlers,bench.traced`` (needs the SDK: requirements-dev.txt)."""

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class Dropped(SpanExporter):
    """Exports nothing, at once."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(Dropped()))
trace.set_tracer_provider(provider)
