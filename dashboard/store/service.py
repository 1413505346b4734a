"""The worker's transitions: claim, renew, progress, settle, lease recovery.

Each is one statement (``store/*.sql``) that writes the job and its events together. They take
explicit inputs (ids, worker id, attempt, ``now``) and return plain records. A call whose
ownership guard matches no row returns ``None``: that is a stale worker being fenced off, a
normal outcome, not an error. The other transitions live beside them: creating jobs in
``enqueue.py``, the operator's retry, cancel, run now and delete in ``actions.py``.

They need an application context (for the engine) and nothing else: no request, no session
cookie, no template.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ..limits import queue_problem
from . import limits_open
from .backoff import delay_table, retry_delay
from .connection import autocommit, fetch_job, fetch_rows
from .records import CleanupResult, JobRecord
from .sql import query
from .values import aware as _aware
from .values import pg_safe
from .values import utcnow as utcnow  # the runtime's clock, read here so a test can move it

CLAIM, CLAIM_ONE = query("claim"), query("claim_one")
CLAIM_NO_LIMITS, CLAIM_ONE_NO_LIMITS = query("claim_no_limits"), query("claim_one_no_limits")
RENEW, PROGRESS = query("renew"), query("progress")
COMPLETE, COMPLETE_WITH_PROGRESS = query("complete"), query("complete_with_progress")
COMPLETE_AND_CLAIM = query("complete_and_claim")
COMPLETE_AND_CLAIM_WITH_PROGRESS = query("complete_and_claim_with_progress")
COMPLETE_AND_CLAIM_NO_LIMITS = query("complete_and_claim_no_limits")
COMPLETE_AND_CLAIM_WITH_PROGRESS_NO_LIMITS = query("complete_and_claim_with_progress_no_limits")
COMPLETE_AND_CLAIM_ONLY_QUEUE = query("complete_and_claim_only_queue")
COMPLETE_AND_CLAIM_WITH_PROGRESS_ONLY_QUEUE = query("complete_and_claim_with_progress_only_queue")

COMPLETE_MANY, COMPLETE_MANY_WITH_PROGRESS = query("complete_many"), query("complete_many_with_progress")
FAIL, FAIL_WITH_PROGRESS = query("fail"), query("fail_with_progress")
CLEANUP_EXPIRED = query("cleanup_expired")


def claim_jobs(
    worker_id: str,
    *,
    lease_seconds: float,
    limit: int = 1,
    now: datetime | None = None,
    conn: Connection | None = None,
    avoid_expired: bool = False,
    queues: Sequence[str] | None = None,
) -> list[JobRecord]:
    """Claim up to ``limit`` eligible jobs for ``worker_id``: within a queue the highest
    priority first, the queues in a random order (:func:`claim_batch`).

    ``now``: the claim's time; unset, the database's clock when the statement runs (claim.sql),
    which is also what the lease is measured from (as for every worker-side call below).
    ``queues``: as :func:`claim_batch`."""
    return claim_batch(
        [worker_id] * limit,
        lease_seconds=lease_seconds,
        now=now,
        conn=conn,
        avoid_expired=avoid_expired,
        queues=queues,
    )


def claim_batch(
    worker_ids: Sequence[str],
    *,
    lease_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
    avoid_expired: bool = False,
    queues: Sequence[str] | None = None,
) -> list[JobRecord]:
    """Claim up to one job per id in ``worker_ids`` in one statement.

    ``queues``: the named queues served (``None``: every queue); a paused queue, or one whose
    concurrency or rate limit is reached, gives nothing. Jobs come in the reference's order
    within a queue; the queues are visited in a random order, each claim anew (claim.sql).
    The n-th claimed job is locked by the n-th id: a worker process claims for all its idle
    threads at once, and each job still belongs to the thread that will run it.
    ``avoid_expired``: skip jobs whose last attempt's lease expired (a worker process passes
    it while one of its threads runs an attempt past its lease, see ``runtime.attempts``).
    """
    if not worker_ids:
        return []
    params = {
        "worker_ids": list(worker_ids),
        "now": _given(now),
        "lease_seconds": float(lease_seconds),
        "avoid_expired": avoid_expired,
        "queues": _served(queues),
    }
    served = limits_open.served_key(queues)
    one = len(worker_ids) == 1
    with autocommit(conn) as conn:
        if limits_open.current(conn, served, params, recheck_closed=False):
            rows = fetch_rows(conn, CLAIM_ONE if one else CLAIM, params)
            return [JobRecord.from_row(row) for row in rows]
        statement = CLAIM_ONE_NO_LIMITS if one else CLAIM_NO_LIMITS
        rows = limits_open.claim_without_limits(conn, served, statement, params)
        jobs = [JobRecord.from_row(row) for row in rows if row["id"] is not None]
        rest = list(worker_ids[len(jobs) :])
        if rest and limits_open.is_open(served):
            # A queue with a limit could give a job and this claim skipped it: the rest of
            # the ids claim again, once, with the limits.
            more = fetch_rows(conn, CLAIM_ONE if len(rest) == 1 else CLAIM, {**params, "worker_ids": rest})
            jobs += [JobRecord.from_row(row) for row in more]
    return jobs


def claim_next_job(
    worker_id: str,
    *,
    lease_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
    queues: Sequence[str] | None = None,
) -> JobRecord | None:
    """Claim the next eligible job: queued -> running, ``attempts + 1``, lease set."""
    jobs = claim_jobs(worker_id, lease_seconds=lease_seconds, limit=1, now=now, conn=conn, queues=queues)
    return jobs[0] if jobs else None


def _served(queues: Sequence[str] | None) -> list[str] | None:
    """The claim's ``:queues``: the names, checked, or ``None`` for every queue."""
    if queues is None:
        return None
    if isinstance(queues, str) or not queues:
        raise ValueError("queues must be a non-empty list of queue names, or None for every queue")
    for name in queues:
        if problem := queue_problem(name):
            raise ValueError(f"queues: {name!r} {problem}")
    return list(queues)


def _owner(job_id: uuid.UUID, worker_id: str, attempt: int) -> dict[str, Any]:
    return {"id": job_id, "worker_id": worker_id, "attempt": attempt}


def _given(now: datetime | None) -> datetime | None:
    """A worker-side statement's ``:now``: the caller's time, checked, or ``None`` for the
    database's clock when the statement runs (claim.sql)."""
    return None if now is None else _aware(now, "now")


def renew_lease(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    *,
    lease_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> datetime | None:
    """Extend the lease to ``lease_seconds`` after the renewal takes effect (the database's
    clock, unless ``now`` is given); return the new ``locked_until``, or ``None`` if ownership
    is lost."""
    params = {**_owner(job_id, worker_id, attempt), "now": _given(now), "lease_seconds": float(lease_seconds)}
    with autocommit(conn) as conn:
        found = fetch_rows(conn, RENEW, params)
        return found[0]["locked_until"] if found else None


def record_progress(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    *,
    message: str = "",
    data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> int | None:
    """Append a ``progress`` event; return its id, or ``None`` if ownership is lost."""
    params = {
        **_owner(job_id, worker_id, attempt),
        "now": _aware(now or utcnow(), "now"),
        "message": pg_safe(message),
        "data": pg_safe(data or {}),
    }
    with autocommit(conn) as conn:
        found = fetch_rows(conn, PROGRESS, params)
        return found[0]["id"] if found else None


def progress_report(
    message: str = "", data: dict[str, Any] | None = None, *, now: datetime | None = None
) -> dict[str, Any]:
    """A progress report held back to be written with the attempt's settle (``progress=`` of
    the settle calls below): the event :func:`record_progress` would write, as a value."""
    at = _aware(now or utcnow(), "now")
    return {"message": pg_safe(message), "data": pg_safe(data or {}), "created_at": at.isoformat()}


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
        **_owner(job_id, worker_id, attempt),
        "now": _given(now),
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
) -> tuple[bool, JobRecord | None]:
    """:func:`complete_job` and :func:`claim_next_job` for the same worker, in one statement.

    Returns whether the success was recorded (``False``: the attempt was no longer ours) and
    the next job claimed, if any. The two are independent: a fenced-off completion still
    claims, and an empty queue still completes. ``avoid_expired`` and ``queues`` as
    :func:`claim_batch`. A concurrency slot the completion frees is free for the next
    statement, not for this one's claim (it reads the statement's snapshot). ``job_queue``:
    the queue of the job completed, if the caller knows it; a job of the only served queue
    without a limit (``limits_open.only_queue``) is then settled by the statement that reads
    that queue alone and frees no slot, and settled again by one that does if its queue has
    a concurrency limit by then.
    """
    params = {
        **_owner(job_id, worker_id, attempt),
        "now": _given(now),
        "lease_seconds": float(lease_seconds),
        "result": result,
        "avoid_expired": avoid_expired,
        "started_at": started_at,
        "queues": _served(queues),
    }
    served = limits_open.served_key(queues)
    if progress:
        params["progress"] = list(progress)
    with autocommit(conn) as conn:
        if limits_open.current(conn, served, params):
            statement = COMPLETE_AND_CLAIM_WITH_PROGRESS if progress else COMPLETE_AND_CLAIM
        elif job_queue is not None and job_queue == limits_open.only_queue(served):
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
            limits_open.limit_found(served)
            statement = COMPLETE_AND_CLAIM_WITH_PROGRESS if progress else COMPLETE_AND_CLAIM
            row = fetch_rows(conn, statement, params)[0]
    if row["freed"]:
        limits_open.freed_a_slot(served)
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
        found = fetch_rows(conn, statement, {"rows": rows, "now": _given(now)})
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
) -> JobRecord | None:
    """Record a failed attempt: requeue after the backoff while attempts remain, else fail.

    Returns the job in its new state (``queued`` or ``failed``), or ``None`` if this worker
    no longer owns the attempt.
    """
    delay = retry_delay(max(attempt, 1), backoff_base_seconds, backoff_max_seconds)
    error = pg_safe(error)
    params = {
        **_owner(job_id, worker_id, attempt),
        "now": _given(now),
        "delay": delay,
        "error": error,
        "event_data": {"error": error, **pg_safe(event_data or {})},
        "started_at": started_at,
    }
    if progress:
        params["progress"] = list(progress)
    with autocommit(conn) as conn:
        return fetch_job(conn, FAIL_WITH_PROGRESS if progress else FAIL, params)


def cleanup_expired_jobs(
    worker_id: str | None,
    *,
    batch_size: int,
    backoff_base_seconds: float,
    backoff_max_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> CleanupResult:
    """Recover up to ``batch_size`` running jobs whose lease has expired.

    Each is requeued after its backoff (event ``timeout_requeued``) or, with no attempts
    left, failed (event ``failed``). ``last_error`` says which lease expired and whose it was.
    """
    params = {
        "worker_id": worker_id,
        "now": _given(now),
        "batch": batch_size,
        "delays": delay_table(backoff_base_seconds, backoff_max_seconds),
        "max_delay": float(backoff_max_seconds),
    }
    with autocommit(conn) as conn:
        rows = fetch_rows(conn, CLEANUP_EXPIRED, params)
    return CleanupResult(
        requeued=[row["id"] for row in rows if row["status"] == "queued"],
        failed=[row["id"] for row in rows if row["status"] == "failed"],
    )
