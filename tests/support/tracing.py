"""OpenTelemetry in the test process: an SDK provider with the in-memory exporter, set for one
test and taken away after (the API lets a process set its provider once; the test puts the
module's global back), and the spans a worker process wrote to a file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def memory_spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An ``InMemorySpanExporter`` receiving every span this process ends during the test."""
    trace = pytest.importorskip("opentelemetry.trace")
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    yield exporter
    provider.shutdown()


def file_spans(path: Path) -> list[dict[str, Any]]:
    """The spans written so far to ``path``, one JSON object a line (ConsoleSpanExporter's)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def hex_id(value: int, digits: int) -> str:
    """An id as the SDK's JSON writes it (``0x`` and lower-case hex digits)."""
    return f"0x{value:0{digits}x}"
