"""What the job pages and the API read: job lists, one job's timeline, the event feed.

With :mod:`read_stats`, the only place that builds read queries, so their cost at ten million
rows can be judged in one place. Each function names the index it relies on. Settings come in
as arguments (:class:`~.read_stats.StatsPolicy`), never from the application.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, Text, cast, func, select, text, tuple_, union_all

from .models import Job, JobEvent
from .read_stats import DEFAULT_POLICY, TYPES_CTE, StatsPolicy, is_large
from .read_timeout import reading
from .records import EventRecord, JobRecord
from .states import STATUSES

jobs = Job.__table__
events = JobEvent.__table__


@dataclass(frozen=True)
class JobPage:
    count: int
    results: list[JobRecord]
    count_exact: bool = True  # False: a type-filtered count on a large table, estimated


# The distinct job types (``read_stats.TYPES_CTE``: a skip scan of job_type_created_idx).
JOB_TYPES_SQL = text(TYPES_CTE + "SELECT type FROM types WHERE type IS NOT NULL")
FILTERED_COUNT_CAP = 10_000  # a type-filtered count reads at most this many index entries
# A type-filtered page with many matches is merged from one newest-first range of
# job_type_created_idx per (type, status), each read up to offset + limit rows: bounded while
# there are at most this many ranges and this deep a page (beyond, the planner's own plan).
MERGED_RANGES_MAX = 64
MERGED_DEPTH_MAX = 10_000


def list_columns(preview_chars: int | None) -> list[Any]:
    """Every job column; with ``preview_chars``, payload and result are only the first that
    many characters of their JSON text, cut in SQL so a large value never leaves the database."""
    if preview_chars is None:
        return list(jobs.c)
    cut = {
        name: func.left(cast(jobs.c[name], Text), preview_chars).label(name) for name in ("payload", "result")
    }
    return [cut.get(column.name, column) for column in jobs.c]


def cancelled_clause(cancelled: bool) -> Any:
    """Jobs an operator cancelled (``True``), or the others (``False``)."""
    return jobs.c.cancelled_at.is_not(None) if cancelled else jobs.c.cancelled_at.is_(None)


def types_matching(conn: Connection, fragment: str) -> list[str]:
    """The job types that contain ``fragment``, case-insensitively (the ``type`` filter)."""
    wanted = fragment.lower()
    return [name for name in conn.execute(JOB_TYPES_SQL).scalars() if wanted in name.lower()]


Keyset = tuple[datetime, uuid.UUID]  # (created_at, id) of a row of the list


def list_jobs(
    *,
    limit: int,
    offset: int,
    status: str | None = None,
    type: str | None = None,
    policy: StatsPolicy = DEFAULT_POLICY,
    preview_chars: int | None = None,
    before: Keyset | None = None,
    after: Keyset | None = None,
    cancelled: bool | None = None,
) -> JobPage:
    """Newest first. ``status`` exact, ``type`` a case-insensitive substring.

    ``cancelled``: ``True`` only the jobs an operator cancelled (failed, ``cancelled_at`` set:
    job_cancelled_idx), ``False`` none of them, ``None`` either.

    ``preview_chars`` (the dashboard's lists): each job's ``payload`` and ``result`` are the
    first that many characters of their JSON text (a ``str``, or ``None``), not the values
    (the pages pass ``limits.PREVIEW_CHARS``); the API leaves it unset and gets them whole.

    ``before`` / ``after`` (the dashboard's keyset paging) give the page of rows older / newer
    than that (created_at, id), whatever ``offset`` says; the API pages by ``offset``.

    On a large table (``policy``) every count is exact only up to :data:`FILTERED_COUNT_CAP`
    (an index range read up to the cap), past it the planner's estimate: a list never counts
    millions of rows, nor computes the overview's figures, to show its own count.

    The substring is first resolved to the job types that contain it (:func:`types_matching`),
    so the filter is ``type IN (...)`` and uses job_type_created_idx (type, status,
    created_at DESC, id DESC) instead of testing every row. Index: jobs_job_created_at_idx for
    the unfiltered order; jobs_job_status_idx for the status filter.
    """
    where = []
    if status:
        where.append(jobs.c.status == status)
    if cancelled is not None:
        where.append(cancelled_clause(cancelled))
    with reading() as conn:
        types = types_matching(conn, type) if type else []
        if type:
            where.append(jobs.c.type.in_(types))
        count, exact = _filtered_count(conn, where, policy)
        columns = list_columns(preview_chars)
        source: Any = jobs
        if type and exact and count <= FILTERED_COUNT_CAP:
            # Few matches: read them all through the type index and sort them. Left to itself
            # the planner may walk the created_at index instead, expecting matches to be
            # common (it multiplies the status and type frequencies), and for a rare
            # combination reads the whole table.
            source = select(*columns).where(*where).offset(0).subquery()  # OFFSET 0: a fence
            columns, where = list(source.c), []
        merged = (
            None
            if source is not jobs or not type or cancelled is not None
            else merged_ranges(types, status, limit + offset, before, after)
        )
        if merged is not None:
            # The page's keys from the merged ranges, then only those rows from the table.
            keys = newest_first(
                select(merged.c.id, merged.c.created_at), merged.c, limit, offset, before, after
            )
            page = keys.subquery()
            ascending = after is not None and before is None
            order = (
                (jobs.c.created_at, jobs.c.id) if ascending else (jobs.c.created_at.desc(), jobs.c.id.desc())
            )
            query = select(*columns).select_from(jobs.join(page, jobs.c.id == page.c.id)).order_by(*order)
        else:
            query = newest_first(select(*columns).where(*where), source.c, limit, offset, before, after)
        nothing = bool(type) and exact and count == 0  # a live count: no page to read
        rows = [] if nothing else read_page(conn, query, after is not None and before is None)
    return JobPage(count=count, results=[JobRecord.from_row(r) for r in rows], count_exact=exact)


def merged_ranges(
    types: Sequence[str],
    status: str | None,
    depth: int,
    before: Keyset | None,
    after: Keyset | None,
) -> Any:
    """The keys (id, created_at) a type-filtered page can come from, as a subquery: for each
    (type, status), its ``depth`` newest rows (or oldest after ``after``), read as one range of
    job_type_created_idx (index only).
    A page of common types never walks the created_at index past rows of other types (a recent
    burst of another type would be read row by row). ``None`` when unbounded (too many ranges,
    or too deep an offset)."""
    statuses = [status] if status else list(STATUSES)
    if len(types) * len(statuses) > MERGED_RANGES_MAX or depth > MERGED_DEPTH_MAX or not types:
        return None
    branches = []
    for job_type in types:
        for each in statuses:
            branch = select(jobs.c.id, jobs.c.created_at).where(
                jobs.c.type == job_type, jobs.c.status == each
            )
            branches.append(newest_first(branch, jobs.c, depth, 0, before, after).subquery().select())
    return union_all(*branches).subquery()


def newest_first(
    query: Select[Any], cols: Any, limit: int, offset: int, before: Keyset | None, after: Keyset | None
) -> Select[Any]:
    """``query`` paged newest first by (created_at, id): the rows older than ``before``, or the
    ``limit`` oldest newer than ``after`` (in ascending order: :func:`read_page` turns them),
    else at ``offset``. Index: the created_at index (or job_type_created_idx) read from the key."""
    key, newest = tuple_(cols.created_at, cols.id), (cols.created_at.desc(), cols.id.desc())
    if before is not None:
        return query.where(key < tuple_(*before)).order_by(*newest).limit(limit)
    if after is not None:
        return query.where(key > tuple_(*after)).order_by(cols.created_at, cols.id).limit(limit)
    return query.order_by(*newest).limit(limit).offset(offset)


def read_page(conn: Connection, query: Select[Any], ascending: bool) -> list[Any]:
    rows = list(conn.execute(query).mappings().all())
    return rows[::-1] if ascending else rows


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


def get_job(job_id: uuid.UUID) -> JobRecord | None:
    with reading() as conn:
        row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
    return JobRecord.from_row(row) if row is not None else None


def job_events(
    job_id: uuid.UUID, *, after_id: int | None = None, limit: int | None = None
) -> list[EventRecord]:
    """One job's timeline, oldest first: every event, or the ``limit`` first with ``id >
    after_id``. Index: job_event_job_id_idx (job_id, id)."""
    query = select(events).where(events.c.job_id == job_id).order_by(events.c.id)
    if after_id is not None:
        query = query.where(events.c.id > after_id)
    if limit is not None:
        query = query.limit(limit)
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
    types: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> EventPage:
    """A page of the global feed, newest first, positioned by event id (a cursor).

    ``before=N`` gives the ``limit`` newest events with ``id < N`` (the next page);
    ``after=N`` the ``limit`` oldest with ``id > N`` (the previous page). Events only ever
    get larger ids, so new events never shift a page: walking ``before`` visits each older
    event exactly once. ``types`` keeps only these types (with ``type``, any of them),
    ``exclude`` drops these. Index: job_event_id_idx, or job_event_job_id_idx with ``job_id``.
    """
    where = _event_where(type, job_id, types, exclude)
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


def types_of(job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The job type of each of ``job_ids`` that still exists (the feed's type column): one
    primary-key lookup per id, a page's worth at most."""
    if not job_ids:
        return {}
    query = select(jobs.c.id, jobs.c.type).where(jobs.c.id.in_(sorted(set(job_ids))))
    with reading() as conn:
        return {row.id: row.type for row in conn.execute(query)}


def _event_where(
    type: str | None, job_id: uuid.UUID | None, types: Sequence[str], exclude: Sequence[str]
) -> list[Any]:
    wanted = sorted({*types, *([type] if type else [])})
    where = []
    if wanted:
        where.append(events.c.type.in_(wanted))
    if exclude:
        where.append(events.c.type.not_in(sorted(set(exclude))))
    if job_id is not None:
        where.append(events.c.job_id == job_id)
    return where


def count_events_after(
    after: int,
    *,
    type: str | None = None,
    job_id: uuid.UUID | None = None,
    cap: int = 100,
    types: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> int:
    """How many events have ``id > after`` (with the feed's filters), counting at most ``cap``.

    The cap keeps the feed's "new events" poll cheap however far behind the page is.
    Index: job_event_id_idx, or job_event_job_id_idx with ``job_id``.
    """
    where = [events.c.id > after, *_event_where(type, job_id, types, exclude)]
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
    older: bool = False  # events older than ``events`` exist (a window was asked for)


def job_timeline(job_id: uuid.UUID, *, limit: int | None = None) -> JobTimeline | None:
    """The job, its timeline (oldest first; with ``limit``, only the newest ``limit`` events)
    and its latest progress among them, on one connection; None if there is no such job.
    Indexes: the primary key, job_event_job_id_idx (job_id, id), read newest first."""
    with reading() as conn:
        row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
        if row is None:
            return None
        job = JobRecord.from_row(row)
        query = select(events).where(events.c.job_id == job_id).order_by(events.c.id.desc())
        if limit is not None:
            query = query.limit(limit + 1)
        timeline = [EventRecord.from_row(r) for r in conn.execute(query).mappings().all()]
    older = limit is not None and len(timeline) > limit
    timeline = timeline[:limit] if older else timeline
    timeline.reverse()
    progress = None
    for event in reversed(timeline):  # the newest progress event of the current attempt
        if event.type == "progress" and event.attempt == job.attempts:
            progress = event
            break
    return JobTimeline(job=job, events=timeline, progress=progress, older=older)
