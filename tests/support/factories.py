"""Jobs in any status, with the other fields consistent with it (the row-shape rules)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert

from dashboard.extensions import db
from dashboard.store.models import Job
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.records import JobRecord
from dashboard.store.values import utcnow


def job_fields(status: str = "queued", *, now: datetime | None = None, **fields: Any) -> dict[str, Any]:
    """Every column of a job shaped for ``status`` (the row-shape rules), unless overridden."""
    now = now or utcnow()
    row: dict[str, Any] = {
        "id": uuid.uuid4(),
        "type": "demo.success",
        "payload": {},
        "status": status,
        "priority": 50,
        "available_at": now,
        "attempts": 0,
        "max_attempts": 3,
        "idempotency_key": None,
        "locked_by": None,
        "locked_until": None,
        "last_error": "",
        "result": None,
        "created_at": now,
        "updated_at": now,
        "finished_at": None,
    }
    if status == "running":
        row.update(attempts=1, locked_by="factory:1:thread-1:abcd", locked_until=now + timedelta(seconds=30))
    elif status == "succeeded":
        row.update(attempts=1, result={"ok": True}, finished_at=now)
    elif status == "failed":
        row.update(attempts=3, last_error="boom", finished_at=now)
    row.update(fields)
    return row


def record(status: str = "queued", *, now: datetime | None = None, **fields: Any) -> JobRecord:
    """A job record shaped for ``status``, built in memory (nothing written)."""
    return JobRecord(**job_fields(status, now=now, **fields))


def make_job(status: str = "queued", *, now: datetime | None = None, **fields: Any) -> JobRecord:
    """Insert one job directly (no events), shaped for ``status`` unless overridden."""
    row = job_fields(status, now=now, **fields)
    with db.engine.begin() as conn:
        conn.execute(insert(Job.__table__).values(**row))
    job = read_jobs.get_job(row["id"])
    assert job is not None
    return job


# A backlog the planner has statistics for: queued jobs of several priorities and types, most
# due, some scheduled, half of them retries, and some running. Plan tests seed it inside a
# transaction they roll back, then ANALYZE: on an empty, never analysed table the estimates are
# guesses, and any partial index on queued rows may win by chance (the overview's figures have two), while
# ``enable_seqscan = off`` would hide a real regression.
BACKLOG_SQL = """
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                          max_attempts, last_error, locked_by, locked_until, created_at, updated_at)
    SELECT gen_random_uuid(), 'demo.t' || (g % 7), '{}',
           CASE WHEN g % 10 = 1 THEN 'running' ELSE 'queued' END, (g % 11) - 5,
           CAST(:now AS timestamptz) - (g % 3600) * interval '1 second'
               + CASE WHEN g % 10 = 0 THEN interval '1 day' ELSE interval '0' END,
           CASE WHEN g % 10 = 1 THEN 1 ELSE g % 2 END, 3, '',
           CASE WHEN g % 10 = 1 THEN 'w' END,
           CASE WHEN g % 10 = 1 THEN CAST(:now AS timestamptz) + (g % 60) * interval '1 second' END,
           CAST(:now AS timestamptz) - g * interval '1 millisecond', :now
    FROM generate_series(1, :rows) AS g
"""


def seed_analysed_backlog(conn: Any, now: datetime, rows: int = 20_000) -> None:
    """:data:`BACKLOG_SQL` on ``conn`` (inside the caller's transaction), then ANALYZE."""
    from sqlalchemy import text

    conn.execute(text(BACKLOG_SQL), {"now": now, "rows": rows})
    conn.exec_driver_sql("ANALYZE jobs_job")


# Many jobs in one statement, ``g`` running from 1 to ``count``: a queued job (never run), or a
# failed one (its one attempt used), its key, error and creation time SQL over ``g``.
SERIES_SQL = """
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts, max_attempts,
                          idempotency_key, last_error, created_at, updated_at, finished_at)
    SELECT gen_random_uuid(), 'demo.success', '{{}}', {status}, 50, t.at, {attempts}, {attempts_max},
           {key}, {error}, t.at, t.at, {finished}
    FROM generate_series(1, :count) AS g, LATERAL (SELECT {at} AS at) AS t
"""


def insert_series(
    conn: Any,
    count: int,
    *,
    failed: bool = False,
    key: str = "NULL",
    error: str = "''",
    at: str = "now()",
    params: dict[str, Any] | None = None,
) -> None:
    """:data:`SERIES_SQL` on ``conn`` (inside the caller's transaction): ``key``, ``error`` and
    ``at`` (creation time, also ``available_at``) are SQL expressions of ``g`` and ``params``."""
    from sqlalchemy import text

    statement = SERIES_SQL.format(
        status="'failed'" if failed else "'queued'",
        attempts=1 if failed else 0,
        attempts_max=1 if failed else 3,
        finished="t.at" if failed else "NULL",
        key=key,
        error=error,
        at=at,
    )
    conn.execute(text(statement), {"count": count, **(params or {})})
