"""What the job pages and the API read: job lists, one job's timeline, the event feed.

With :mod:`read_stats`, the only place that builds read queries, so their cost at ten million
rows can be judged in one place. Each function names the index it relies on. Settings come in
as arguments (:class:`~.read_stats.StatsPolicy`), never from the application.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Text, cast, func, select, text

from .models import Job, JobEvent
from .read_stats import DEFAULT_POLICY, StatsPolicy, is_large, large_table_stats
from .read_timeout import reading
from .records import EventRecord, JobRecord

jobs = Job.__table__
events = JobEvent.__table__


@dataclass(frozen=True)
class JobPage:
    count: int
    results: list[JobRecord]
    count_exact: bool = True  # False: a type-filtered count on a large table, estimated


# The distinct job types, by a skip scan of job_type_created_idx: one index descent per type
# instead of reading every row (cost: docs/benchmarks.md).
JOB_TYPES_SQL = text(
    """
    WITH RECURSIVE types AS (
        (SELECT type FROM jobs_job ORDER BY type LIMIT 1)
        UNION ALL
        SELECT (SELECT j.type FROM jobs_job j WHERE j.type > types.type ORDER BY j.type LIMIT 1)
        FROM types WHERE types.type IS NOT NULL
    )
    SELECT type FROM types WHERE type IS NOT NULL
    """
)
FILTERED_COUNT_CAP = 10_000  # a type-filtered count reads at most this many index entries


def list_columns(preview_chars: int | None) -> list[Any]:
    """Every job column; with ``preview_chars``, payload and result are only the first that
    many characters of their JSON text, cut in SQL so a large value never leaves the database."""
    if preview_chars is None:
        return list(jobs.c)
    cut = {
        name: func.left(cast(jobs.c[name], Text), preview_chars).label(name) for name in ("payload", "result")
    }
    return [cut.get(column.name, column) for column in jobs.c]


def types_matching(conn: Connection, fragment: str) -> list[str]:
    """The job types that contain ``fragment``, case-insensitively (the ``type`` filter)."""
    wanted = fragment.lower()
    return [name for name in conn.execute(JOB_TYPES_SQL).scalars() if wanted in name.lower()]


def list_jobs(
    *,
    limit: int,
    offset: int,
    status: str | None = None,
    type: str | None = None,
    policy: StatsPolicy = DEFAULT_POLICY,
    preview_chars: int | None = None,
) -> JobPage:
    """Newest first. ``status`` exact, ``type`` a case-insensitive substring.

    ``preview_chars`` (the dashboard's lists): each job's ``payload`` and ``result`` are the
    first that many characters of their JSON text (a ``str``, or ``None``), not the values
    (the pages pass ``limits.PREVIEW_CHARS``); the API leaves it unset and gets them whole.

    On a large table (``policy``) the unfiltered and status counts come from the stats figures,
    and a type-filtered count is exact only up to :data:`FILTERED_COUNT_CAP`.

    The substring is first resolved to the job types that contain it (:func:`types_matching`),
    so the filter is ``type IN (...)`` and uses job_type_created_idx (type, status,
    created_at DESC, id DESC) instead of testing every row. Index: jobs_job_created_at_idx for
    the unfiltered order; jobs_job_status_idx for the status filter.
    """
    where = []
    if status:
        where.append(jobs.c.status == status)
    with reading() as conn:
        exact = True
        if not type:
            count = _large_table_count(conn, status, policy)
            if count is None:
                count = conn.execute(select(func.count()).select_from(jobs).where(*where)).scalar_one()
        else:
            where.append(jobs.c.type.in_(types_matching(conn, type)))
            count, exact = _filtered_count(conn, where, policy)
        columns = list_columns(preview_chars)
        query = select(*columns).where(*where).order_by(jobs.c.created_at.desc(), jobs.c.id.desc())
        if type and exact and count <= FILTERED_COUNT_CAP:
            # Few matches: read them all through the type index and sort them. Left to itself
            # the planner may walk the created_at index instead, expecting matches to be
            # common (it multiplies the status and type frequencies), and for a rare
            # combination reads the whole table.
            matches = select(*columns).where(*where).offset(0).subquery()  # OFFSET 0: a fence
            query = select(matches).order_by(matches.c.created_at.desc(), matches.c.id.desc())
        nothing = bool(type) and exact and count == 0  # a live count: no page to read
        rows = [] if nothing else conn.execute(query.limit(limit).offset(offset)).mappings().all()
    return JobPage(count=count, results=[JobRecord.from_row(r) for r in rows], count_exact=exact)


def _filtered_count(conn: Connection, where: list[Any], policy: StatsPolicy) -> tuple[int, bool]:
    """(count, exact) of a type-filtered list. On a large table, counted exactly up to
    :data:`FILTERED_COUNT_CAP` rows; past it, the planner's estimate (counting millions of
    matching rows would cost seconds on every page)."""
    if not is_large(conn, policy):
        return conn.execute(select(func.count()).select_from(jobs).where(*where)).scalar_one(), True
    capped = select(text("1")).select_from(jobs).where(*where).limit(FILTERED_COUNT_CAP + 1).subquery()
    count = conn.execute(select(func.count()).select_from(capped)).scalar_one()
    if count <= FILTERED_COUNT_CAP:
        return count, True
    probe = select(text("1")).select_from(jobs).where(*where)
    compiled = probe.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {compiled}", compiled.params).scalar_one()
    return max(int(plan[0]["Plan"]["Plan Rows"]), count), False


def _large_table_count(conn: Connection, status: str | None, policy: StatsPolicy) -> int | None:
    """On a large table, the count from the stats figures (live ones exact, finished ones
    cached) instead of counting millions of rows on every page; None on a small one."""
    if not is_large(conn, policy):
        return None
    figures = large_table_stats(conn, datetime.now(UTC), policy)
    return figures.by_status.get(status, 0) if status else figures.total


def get_job(job_id: uuid.UUID) -> JobRecord | None:
    with reading() as conn:
        row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
    return JobRecord.from_row(row) if row is not None else None


def job_events(job_id: uuid.UUID) -> list[EventRecord]:
    """One job's timeline, oldest first. Index: job_event_job_id_idx (job_id, id)."""
    query = select(events).where(events.c.job_id == job_id).order_by(events.c.id)
    with reading() as conn:
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
    with reading() as conn:
        rows = conn.execute(query).mappings().all()
    more = len(rows) > limit
    records = [EventRecord.from_row(r) for r in rows[:limit]]
    if reverse:
        records.reverse()
        return EventPage(results=records, has_older=True, has_newer=more)
    return EventPage(results=records, has_older=more, has_newer=before is not None)


def count_events_after(
    after: int, *, type: str | None = None, job_id: uuid.UUID | None = None, cap: int = 100
) -> int:
    """How many events have ``id > after`` (with the feed's filters), counting at most ``cap``.

    The cap keeps the feed's "new events" poll cheap however far behind the page is.
    Index: job_event_id_idx, or job_event_job_id_idx with ``job_id``.
    """
    where = [events.c.id > after]
    if type:
        where.append(events.c.type == type)
    if job_id is not None:
        where.append(events.c.job_id == job_id)
    inner = select(events.c.id).where(*where).limit(cap).subquery()
    with reading() as conn:
        return conn.execute(select(func.count()).select_from(inner)).scalar_one()


def latest_progress(job_id: uuid.UUID, attempt: int) -> EventRecord | None:
    """The newest ``progress`` event of one attempt of a job, if any.

    Index: job_event_job_id_idx (job_id, id), read backwards from the newest event.
    """
    query = (
        select(events)
        .where(events.c.job_id == job_id, events.c.type == "progress", events.c.attempt == attempt)
        .order_by(events.c.id.desc())
        .limit(1)
    )
    with reading() as conn:
        row = conn.execute(query).mappings().first()
    return EventRecord.from_row(row) if row is not None else None


@dataclass(frozen=True)
class JobTimeline:
    """One job as its page shows it: the row, its events, its running attempt's progress."""

    job: JobRecord
    events: list[EventRecord]
    progress: EventRecord | None  # newest ``progress`` event of the current attempt


def job_timeline(job_id: uuid.UUID) -> JobTimeline | None:
    """The job, its timeline (oldest first) and its latest progress, on one connection; None
    if there is no such job. Indexes: the primary key, job_event_job_id_idx (job_id, id)."""
    with reading() as conn:
        row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
        if row is None:
            return None
        job = JobRecord.from_row(row)
        rows = conn.execute(select(events).where(events.c.job_id == job_id).order_by(events.c.id)).mappings()
        timeline = [EventRecord.from_row(r) for r in rows.all()]
    progress = None
    for event in reversed(timeline):  # the newest progress event of the current attempt
        if event.type == "progress" and event.attempt == job.attempts:
            progress = event
            break
    return JobTimeline(job=job, events=timeline, progress=progress)
