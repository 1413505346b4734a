"""What issue 17 adds to a job's page: why a queued job is not running, each attempt's error
with its traceback as lines, and the cancel and run-now buttons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..store import read_timeout, why
from ..store.records import EventRecord, JobRecord
from .rendering import now

ERROR_EVENTS = ("retry_scheduled", "failed", "timeout_requeued", "cancelled")


@dataclass(frozen=True)
class AttemptError:
    attempt: int
    event_type: str
    error: str
    exception_type: str | None
    traceback: list[str]  # lines, shown in a pre block


def attempt_errors(events: list[EventRecord]) -> list[AttemptError]:
    found = []
    for event in events:
        if event.type not in ERROR_EVENTS:
            continue
        data = event.data if isinstance(event.data, dict) else {}
        error = data.get("error") if isinstance(data.get("error"), str) else event.message
        trace = data.get("traceback")
        kind = data.get("exception_type")
        found.append(
            AttemptError(
                attempt=event.attempt,
                event_type=event.type,
                error=error or "",
                exception_type=kind if isinstance(kind, str) else None,
                traceback=trace.rstrip("\n").splitlines() if isinstance(trace, str) else [],
            )
        )
    return found


def job_extras(job: JobRecord, events: list[EventRecord]) -> dict[str, Any]:
    current = now()
    reasons: list[why.Reason] | None = []
    if job.status == "queued":
        try:
            reasons = why.why_not_running(job, current)
        except read_timeout.QueryTimeout:
            reasons = None  # the template says it could not tell
    return {
        "why_reasons": reasons,
        "attempt_errors": attempt_errors(events) if job.status == "failed" else [],
        "can_cancel": job.status == "queued",
        "can_run_now": job.status == "queued" and job.available_at > current,
    }
