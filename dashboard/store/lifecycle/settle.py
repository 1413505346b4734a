"""Settling an attempt: running -> succeeded, or -> queued (backoff) or failed (``settle.sql``).

Each is one statement that writes the job, its events and the freed limit slot together,
fenced by the owner and the attempt: a stale worker's settle matches no row and returns
``None``. The one-job form also claims the thread's next job in the same statement.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

import dashboard.store.lifecycle.claim_form as claim_form

from ..connection import autocommit, fetch_job, fetch_rows
from ..records import JobRecord
from ..sql import query
from ..values import pg_safe
from .backoff import retry_delay
from .claim import served_queues
from .fencing import given_now, owner

COMPLETE, COMPLETE_WITH_PROGRESS = query("complete"), query("complete_with_progress")
COMPLETE_AND_CLAIM = query("complete_and_claim")
COMPLETE_AND_CLAIM_WITH_PROGRESS = query("complete_and_claim_with_progress")
COMPLETE_AND_CLAIM_NO_LIMITS = query("complete_and_claim_no_limits")
COMPLETE_AND_CLAIM_WITH_PROGRESS_NO_LIMITS = query("complete_and_claim_with_progress_no_limits")
COMPLETE_AND_CLAIM_ONLY_QUEUE = query("complete_and_claim_only_queue")
COMPLETE_AND_CLAIM_WITH_PROGRESS_ONLY_QUEUE = query("complete_and_claim_with_progress_only_queue")
COMPLETE_MANY, COMPLETE_MANY_WITH_PROGRESS = query("complete_many"), query("complete_many_with_progress")
FAIL, FAIL_WITH_PROGRESS = query("fail"), query("fail_with_progress")


def complete_job(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    result: Any = None,
    *,
    event_data: dict[str, Any] | None = None,
    progress: Sequence[dict[str, Any]] = (),
    started_at: datetime | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> JobRecord | None:
    """running -> succeeded, only for the owner of this attempt; else ``None``.

    ``progress``: reports from :func:`progress_report`, written before the ``succeeded`` event
    in the same statement, and only if the attempt is still ours (the same for every settle).
    ``started_at``: when the attempt started (its claim, or for a job claimed ahead of the
    threads, when a thread took it), if the caller knows it: the outcome's ``run_ms`` is
    computed from it instead of from the ``claimed`` event (the same for every settle).
    """
    params = {
        **owner(job_id, worker_id, attempt),
        "now": given_now(now),
        "result": result,
        "event_data": event_data or {},
        "started_at": started_at,
    }
    if progress:
        params["progress"] = list(progress)
    with autocommit(conn) as conn:
        return fetch_job(conn, COMPLETE_WITH_PROGRESS if progress else COMPLETE, params)


def complete_and_claim(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    result: Any = None,
    *,
    lease_seconds: float,
    progress: Sequence[dict[str, Any]] = (),
    started_at: datetime | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
    avoid_expired: bool = False,
    queues: Sequence[str] | None = None,
    job_queue: str | None = None,
    forms: claim_form.ClaimForms | None = None,
) -> tuple[bool, JobRecord | None]:
    """:func:`complete_job` and :func:`claim_next_job` for the same worker, in one statement.

    Returns whether the success was recorded (``False``: the attempt was no longer ours) and
    the next job claimed, if any. The two are independent: a fenced-off completion still
    claims, and an empty queue still completes. ``avoid_expired``, ``queues`` and ``forms`` as
    :func:`claim_batch`. A concurrency slot the completion frees is free for the next
    statement, not for this one's claim (it reads the statement's snapshot). ``job_queue``:
    the queue of the job completed, if the caller knows it; a job of the only served queue
    without a limit (``ClaimForms.only_queue``) is then settled by the statement that reads
    that queue alone and frees no slot, and settled again by one that does if its queue has
    a concurrency limit by then. The statement locks the job it settles before it claims, so
    it never waits for a lock while it holds a claim (settle.sql says why).
    """
    params = {
        **owner(job_id, worker_id, attempt),
        "now": given_now(now),
        "lease_seconds": float(lease_seconds),
        "result": result,
        "avoid_expired": avoid_expired,
        "started_at": started_at,
        "queues": served_queues(queues),
    }
    served = claim_form.served_key(queues)
    if forms is None:
        forms = claim_form.DEFAULT
    if progress:
        params["progress"] = list(progress)
    with autocommit(conn) as conn:
        if forms.current(conn, served, params):
            statement = COMPLETE_AND_CLAIM_WITH_PROGRESS if progress else COMPLETE_AND_CLAIM
        elif job_queue is not None and job_queue == forms.only_queue(served):
            params["queue"] = job_queue  # the one served queue without a limit: its range, directly
            statement = (
                COMPLETE_AND_CLAIM_WITH_PROGRESS_ONLY_QUEUE if progress else COMPLETE_AND_CLAIM_ONLY_QUEUE
            )
        elif progress:
            statement = COMPLETE_AND_CLAIM_WITH_PROGRESS_NO_LIMITS
        else:
            statement = COMPLETE_AND_CLAIM_NO_LIMITS
        row = fetch_rows(conn, statement, params)[0]
        if row.get("limited"):  # its queue has a concurrency limit now: its job may hold a slot
            forms.limit_found(served)
            statement = COMPLETE_AND_CLAIM_WITH_PROGRESS if progress else COMPLETE_AND_CLAIM
            row = fetch_rows(conn, statement, params)[0]
    if row["freed"]:
        forms.freed_a_slot(served)
    claimed = JobRecord.from_row(row) if row["id"] is not None else None
    return bool(row["completed"]), claimed


def complete_jobs(
    completions: Sequence[tuple[uuid.UUID, str, int, Any]],
    *,
    progress: Mapping[uuid.UUID, Sequence[dict[str, Any]]] | None = None,
    started_at: Mapping[uuid.UUID, datetime] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> set[uuid.UUID]:
    """Record many successes ``(job_id, worker_id, attempt, result)`` in one statement.

    Each is fenced on its own, exactly as :func:`complete_job`; returns the ids recorded (the
    others were no longer owned by that worker and attempt). ``progress``: pending reports
    by job id, written as :func:`complete_job` writes them. ``started_at``: each attempt's
    start by job id, as :func:`complete_job`'s.
    """
    if not completions:
        return set()
    started_at = started_at or {}
    rows = [
        {
            "id": str(job_id),
            "worker_id": worker_id,
            "attempt": attempt,
            "result": result,
            "started_at": at.isoformat() if (at := started_at.get(job_id)) else None,
        }
        for job_id, worker_id, attempt, result in completions
    ]
    statement = COMPLETE_MANY
    if progress:
        statement = COMPLETE_MANY_WITH_PROGRESS
        for row, (job_id, *_) in zip(rows, completions, strict=True):
            row["progress"] = list(progress.get(job_id, ()))
    with autocommit(conn) as conn:
        found = fetch_rows(conn, statement, {"rows": rows, "now": given_now(now)})
        return {row["id"] for row in found}


def fail_job(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    error: str,
    *,
    backoff_base_seconds: float,
    backoff_max_seconds: float,
    event_data: dict[str, Any] | None = None,
    progress: Sequence[dict[str, Any]] = (),
    started_at: datetime | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
    snoozes: int = 0,
) -> JobRecord | None:
    """Record a failed attempt: requeue after the backoff while attempts remain, else fail.

    Returns the job in its new state (``queued`` or ``failed``), or ``None`` if this worker
    no longer owns the attempt. ``snoozes``: the job's, as claimed: the backoff counts the
    attempts that did not snooze (snooze.sql).
    """
    delay = retry_delay(max(attempt - snoozes, 1), backoff_base_seconds, backoff_max_seconds)
    error = pg_safe(error)
    params = {
        **owner(job_id, worker_id, attempt),
        "now": given_now(now),
        "delay": delay,
        "error": error,
        "event_data": {"error": error, **pg_safe(event_data or {})},
        "started_at": started_at,
    }
    if progress:
        params["progress"] = list(progress)
    with autocommit(conn) as conn:
        return fetch_job(conn, FAIL_WITH_PROGRESS if progress else FAIL, params)
