"""What the pages and the API read: job lists, timelines, the event feed and stats.

This is the only module that builds read queries, so their cost at a million rows can be
judged in one place. Each function names the index it relies on.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text

from ..extensions import db
from .models import Job, JobEvent
from .records import EventRecord, JobRecord
from .states import STATUSES

jobs = Job.__table__
events = JobEvent.__table__


def _escape_like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@dataclass(frozen=True)
class JobPage:
    count: int
    results: list[JobRecord]


def list_jobs(*, limit: int, offset: int, status: str | None = None, type: str | None = None) -> JobPage:
    """Newest first. ``status`` exact, ``type`` a case-insensitive substring.

    Index: jobs_job_created_at_idx for the order; jobs_job_status_idx for the status filter.
    """
    where = []
    if status:
        where.append(jobs.c.status == status)
    if type:
        where.append(jobs.c.type.ilike(f"%{_escape_like(type)}%", escape="\\"))
    query = (
        select(jobs)
        .where(*where)
        .order_by(jobs.c.created_at.desc(), jobs.c.id.desc())
        .limit(limit)
        .offset(offset)
    )
    count_query = select(func.count()).select_from(jobs).where(*where)
    with db.engine.connect() as conn:
        count = conn.execute(count_query).scalar_one()
        rows = conn.execute(query).mappings().all()
    return JobPage(count=count, results=[JobRecord.from_row(r) for r in rows])


def get_job(job_id: uuid.UUID) -> JobRecord | None:
    with db.engine.connect() as conn:
        row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
    return JobRecord.from_row(row) if row is not None else None


def job_events(job_id: uuid.UUID) -> list[EventRecord]:
    """One job's timeline, oldest first. Index: job_event_job_id_idx (job_id, id)."""
    query = select(events).where(events.c.job_id == job_id).order_by(events.c.id)
    with db.engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    return [EventRecord.from_row(r) for r in rows]


@dataclass(frozen=True)
class EventPage:
    results: list[EventRecord]  # newest first
    has_older: bool
    has_newer: bool


def list_events(
    *,
    limit: int,
    before: int | None = None,
    after: int | None = None,
    type: str | None = None,
    job_id: uuid.UUID | None = None,
) -> EventPage:
    """A page of the global feed, newest first, positioned by event id (a cursor).

    ``before=N`` gives the ``limit`` newest events with ``id < N`` (the next page);
    ``after=N`` the ``limit`` oldest with ``id > N`` (the previous page). Events only ever
    get larger ids, so new events never shift a page: walking ``before`` visits each older
    event exactly once. Index: job_event_id_idx, or job_event_job_id_idx with ``job_id``.
    """
    where = []
    if type:
        where.append(events.c.type == type)
    if job_id is not None:
        where.append(events.c.job_id == job_id)
    reverse = after is not None
    if reverse:
        where.append(events.c.id > after)
    elif before is not None:
        where.append(events.c.id < before)
    order = events.c.id.asc() if reverse else events.c.id.desc()
    query = select(events).where(*where).order_by(order).limit(limit + 1)
    with db.engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    more = len(rows) > limit
    records = [EventRecord.from_row(r) for r in rows[:limit]]
    if reverse:
        records.reverse()
        return EventPage(results=records, has_older=True, has_newer=more)
    return EventPage(results=records, has_older=more, has_newer=before is not None)


@dataclass(frozen=True)
class Stats:
    total: int
    by_status: dict[str, int]
    overdue_running: int
    retries_pending: int
    oldest_queued_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "by_status": dict(self.by_status),
            "overdue_running": self.overdue_running,
            "retries_pending": self.retries_pending,
            "oldest_queued_at": self.oldest_queued_at,
        }


STATS_SQL = text(
    """
    SELECT
        count(*) AS total,
        count(*) FILTER (WHERE status = 'queued') AS queued,
        count(*) FILTER (WHERE status = 'running') AS running,
        count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
        count(*) FILTER (WHERE status = 'failed') AS failed,
        count(*) FILTER (WHERE status = 'running' AND locked_until < :now) AS overdue_running,
        count(*) FILTER (WHERE status = 'queued' AND attempts > 0) AS retries_pending,
        min(created_at) FILTER (WHERE status = 'queued') AS oldest_queued_at
    FROM jobs_job
    """
)


def stats(now: datetime) -> Stats:
    """The reference's stats. One pass over ``jobs_job``: exact, and O(rows)."""
    with db.engine.connect() as conn:
        row = conn.execute(STATS_SQL, {"now": now}).mappings().one()
    return Stats(
        total=row["total"],
        by_status={status: row[status] for status in STATUSES},
        overdue_running=row["overdue_running"],
        retries_pending=row["retries_pending"],
        oldest_queued_at=row["oldest_queued_at"],
    )


def database_ok() -> None:
    """Raise if the database cannot answer a trivial query."""
    with db.engine.connect() as conn:
        conn.execute(text("SELECT 1"))
