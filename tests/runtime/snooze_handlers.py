"""Job types that snooze, loaded by the worker through ``JOB_HANDLER_MODULES``."""

from __future__ import annotations

import sys
from typing import Any

from dashboard.jobs import JobContext, Snooze, handler


@handler("sample.snoozy", max_attempts=2)
def snoozy(ctx: JobContext) -> dict[str, Any]:
    """Snoozes (0 s) until it has snoozed ``payload["times"]`` times, then succeeds."""
    if ctx.snoozes < ctx.payload.get("times", 1):
        ctx.progress(10, f"snoozing, time {ctx.snoozes + 1}")
        raise Snooze(ctx.payload.get("seconds", 0))
    return {"attempt": ctx.attempt, "snoozes": ctx.snoozes, "max_attempts": ctx.max_attempts}


@handler("sample.modules")
def modules(ctx: JobContext) -> dict[str, Any]:
    """Whether any OpenTelemetry module is loaded in this worker process."""
    return {"otel": sorted(m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry."))}
