"""What a job's page adds to the job's fields: why a queued job is not running, who owns a
running one (and whether that owner still sends heartbeats), each attempt's error with its
traceback as lines, the cancel, run-now and delete buttons, its parents and dependents (and
the parent whose failure cancelled it), and for a deleted job's id what the audit log says."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from ..store import audit, reading
from ..store.reads import capacity, why
from ..store.reads import workflows as read_workflows
from ..store.records import EventRecord, JobRecord
from ..store.states import TERMINAL
from .rendering import now
from .timefmt import absolute, relative

ERROR_EVENTS = ("retry_scheduled", "failed", "timeout_requeued", "cancelled")
# The last_error of a job its parent's failure cancelled (dependents.py, migration 0018).
CANCELLED_BY_PARENT = re.compile(r"Cancelled: parent ([0-9a-f-]{36}) failed")


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


def job_panels(job: JobRecord, events: list[EventRecord]) -> dict[str, Any]:
    current = now()
    reasons: list[why.Reason] | None = []
    if job.status == "queued":
        try:
            reasons = why.why_not_running(job, current)
        except reading.QueryTimeout:
            reasons = None  # the template says it could not tell
    return {
        "why_reasons": reasons,
        "attempt_errors": attempt_errors(events) if job.status == "failed" else [],
        "can_cancel": job.status == "queued",
        "can_run_now": job.status == "queued" and job.available_at > current and not job.waiting,
        "can_delete": job.status in TERMINAL,
        **relatives(job),
    }


def relatives(job: JobRecord) -> dict[str, Any]:
    """The job's parents (at most 100: its ``depends_on``), its dependents (at most
    ``DEPENDENTS_CAP`` + 1 read, to say "more"), and the parent whose failure cancelled it."""
    try:
        parents = read_workflows.parents(job.depends_on or [])
        found = read_workflows.dependents(job.id, cap=read_workflows.DEPENDENTS_CAP + 1)
    except reading.QueryTimeout:
        return {"parents": [], "dependents": [], "more_dependents": False, "relatives_timed_out": True}
    cause = CANCELLED_BY_PARENT.fullmatch(job.last_error) if job.cancelled_at is not None else None
    return {
        "parents": parents,
        "parents_gone": len(job.depends_on or []) - len(parents),
        "dependents": found[: read_workflows.DEPENDENTS_CAP],
        "more_dependents": len(found) > read_workflows.DEPENDENTS_CAP,
        "cancelled_by_parent": cause.group(1) if cause else None,
    }


def running_owner(job: JobRecord) -> capacity.Owner | None:
    """A running job's owner from its heartbeats (the job page and its poll say whether it
    still reports, and when the rescue takes the job back); None for any other job."""
    if job.status != "running" or not job.locked_by or job.locked_until is None:
        return None
    try:
        return capacity.owner_of(job.locked_by, job.locked_until, str(job.id), now())
    except reading.QueryTimeout:
        return None


def deleted_note(job_id: uuid.UUID, tz: Any) -> str | None:
    """For the 404 of a job that is gone: who deleted it and when, if the audit log says."""
    try:
        entries = [e for e in audit.for_job(job_id) if e.action == "job_deleted"]
    except SQLAlchemyError:
        return None
    if not entries:
        return None
    entry = entries[0]
    by = entry.actor or "an operator"
    when = f"{relative(entry.created_at, now())} ({absolute(entry.created_at, tz)})"
    return f"This job was deleted by {by} {when}, with its events; the audit log keeps the record."
