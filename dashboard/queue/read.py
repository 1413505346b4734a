"""What the pages and the API read: job lists, timelines, the event feed and stats.

This is the only module that builds read queries, so their cost at a million rows can be
judged in one place. Each function names the index it relies on.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from flask import current_app
from sqlalchemy import Connection, Text, cast, func, select, text
from sqlalchemy.exc import OperationalError

from ..extensions import db
from .models import Job, JobEvent
from .records import EventRecord, JobRecord
from .states import STATUSES

jobs = Job.__table__
events = JobEvent.__table__

_time_limit_ms: ContextVar[int | None] = ContextVar("read_time_limit_ms", default=None)


class QueryTimeout(RuntimeError):
    """A read ran past the time limit of :func:`time_limit` and was cancelled."""


@contextmanager
def time_limit(milliseconds: int | None) -> Iterator[None]:
    """Run the reads inside with ``statement_timeout``: a slow query fails, fast.

    The dashboard reads each panel under a limit, so a query that a huge table makes slow
    costs one panel (:class:`QueryTimeout`), not the whole page or a stuck web worker.
    """
    token = _time_limit_ms.set(milliseconds)
    try:
        yield
    finally:
        _time_limit_ms.reset(token)


@contextmanager
def _connect() -> Iterator[Connection]:
    with db.engine.connect() as conn:
        limit = _time_limit_ms.get()
        if limit:  # SET LOCAL: this read's transaction only, never a pooled connection's default
            conn.exec_driver_sql(f"SET LOCAL statement_timeout = {int(limit)}")
        try:
            yield conn
        except OperationalError as error:
            if isinstance(error.orig, psycopg.errors.QueryCanceled):
                raise QueryTimeout(f"query cancelled after {limit} ms") from error
            raise


@dataclass(frozen=True)
class JobPage:
    count: int
    results: list[JobRecord]
    count_exact: bool = True  # False: a type-filtered count on a large table, estimated


# The distinct job types, by a skip scan of job_type_created_idx: one index descent per type
# instead of reading every row (a few milliseconds at 10M jobs with a handful of types).
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
PREVIEW_CHARS = 200  # what the pages read of a payload or result in a list (as JSON text)


def _list_columns(preview_chars: int | None) -> list[Any]:
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
    preview_chars: int | None = None,
) -> JobPage:
    """Newest first. ``status`` exact, ``type`` a case-insensitive substring.

    ``preview_chars`` (the dashboard's lists): each job's ``payload`` and ``result`` are the
    first that many characters of their JSON text (a ``str``, or ``None``), not the values;
    the API leaves it unset and gets them whole.

    The substring is first resolved to the job types that contain it (:func:`types_matching`),
    so the filter is ``type IN (...)`` and uses job_type_created_idx (type, status,
    created_at DESC, id DESC) instead of testing every row. Index: jobs_job_created_at_idx for
    the unfiltered order; jobs_job_status_idx for the status filter.
    """
    where = []
    if status:
        where.append(jobs.c.status == status)
    with _connect() as conn:
        exact = True
        if not type:
            count = _large_table_count(conn, status)
            if count is None:
                count = conn.execute(select(func.count()).select_from(jobs).where(*where)).scalar_one()
        else:
            where.append(jobs.c.type.in_(types_matching(conn, type)))
            count, exact = _filtered_count(conn, where)
        columns = _list_columns(preview_chars)
        query = select(*columns).where(*where).order_by(jobs.c.created_at.desc(), jobs.c.id.desc())
        if type and exact and count <= FILTERED_COUNT_CAP:
            # Few matches: read them all through the type index and sort them. Left to itself
            # the planner may walk the created_at index instead, expecting matches to be
            # common (it multiplies the status and type frequencies); for a rare combination
            # that read all 10M rows.
            matches = select(*columns).where(*where).offset(0).subquery()  # OFFSET 0: a fence
            query = select(matches).order_by(matches.c.created_at.desc(), matches.c.id.desc())
        nothing = bool(type) and exact and count == 0  # a live count: no page to read
        rows = [] if nothing else conn.execute(query.limit(limit).offset(offset)).mappings().all()
    return JobPage(count=count, results=[JobRecord.from_row(r) for r in rows], count_exact=exact)


def _filtered_count(conn: Connection, where: list[Any]) -> tuple[int, bool]:
    """(count, exact) of a type-filtered list. On a large table, counted exactly up to
    :data:`FILTERED_COUNT_CAP` rows; past it, the planner's estimate (counting millions of
    matching rows would cost seconds on every page)."""
    if not _is_large(conn, _app_policy()):
        return conn.execute(select(func.count()).select_from(jobs).where(*where)).scalar_one(), True
    capped = select(text("1")).select_from(jobs).where(*where).limit(FILTERED_COUNT_CAP + 1).subquery()
    count = conn.execute(select(func.count()).select_from(capped)).scalar_one()
    if count <= FILTERED_COUNT_CAP:
        return count, True
    probe = select(text("1")).select_from(jobs).where(*where)
    compiled = probe.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {compiled}", compiled.params).scalar_one()
    return max(int(plan[0]["Plan"]["Plan Rows"]), count), False


def _large_table_count(conn: Connection, status: str | None) -> int | None:
    """On a large table, the count from the stats figures (live ones exact, finished ones
    cached) instead of counting millions of rows on every page; None on a small one."""
    policy = _app_policy()
    if not _is_large(conn, policy):
        return None
    figures = _large_table_stats(conn, datetime.now(UTC), policy)
    return figures.by_status.get(status, 0) if status else figures.total


def get_job(job_id: uuid.UUID) -> JobRecord | None:
    with _connect() as conn:
        row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
    return JobRecord.from_row(row) if row is not None else None


def job_events(job_id: uuid.UUID) -> list[EventRecord]:
    """One job's timeline, oldest first. Index: job_event_job_id_idx (job_id, id)."""
    query = select(events).where(events.c.job_id == job_id).order_by(events.c.id)
    with _connect() as conn:
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
    with _connect() as conn:
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
    # When the succeeded/failed figures (and so the total) were counted; None when exact.
    finished_counted_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        """The reference's shape."""
        return {
            "total": self.total,
            "by_status": dict(self.by_status),
            "overdue_running": self.overdue_running,
            "retries_pending": self.retries_pending,
            "oldest_queued_at": self.oldest_queued_at,
        }


@dataclass(frozen=True)
class StatsPolicy:
    """Exact counts below ``exact_below_rows`` (estimated); above, cached finished totals."""

    exact_below_rows: int = 100_000
    refresh_seconds: float = 30.0


# Exact, in one pass over jobs_job: cheap on a small table, O(rows) on a large one.
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

# Large tables: live figures exact through the partial indexes (job_claim_idx for queued,
# job_timeout_idx for running and overdue), finished totals from jobs_finished_counts.
LIVE_STATS_SQL = text(
    """
    SELECT
        (SELECT count(*) FROM jobs_job WHERE status = 'queued') AS queued,
        (SELECT count(*) FROM jobs_job WHERE status = 'running') AS running,
        (SELECT count(*) FROM jobs_job WHERE status = 'running' AND locked_until < :now)
            AS overdue_running,
        (SELECT count(*) FROM jobs_job WHERE status = 'queued' AND attempts > 0) AS retries_pending,
        (SELECT min(created_at) FROM jobs_job WHERE status = 'queued') AS oldest_queued_at,
        f.succeeded, f.failed, f.counted_at
    FROM jobs_finished_counts AS f
    """
)


def _app_policy() -> StatsPolicy:
    settings = current_app.extensions["jobqueue.settings"]
    return StatsPolicy(settings.stats_exact_below_rows, settings.stats_refresh_seconds)


# The planner's row estimate (kept by autovacuum's ANALYZE): free, and plenty to choose by.
ESTIMATED_ROWS_SQL = text("SELECT reltuples::bigint FROM pg_class WHERE oid = 'jobs_job'::regclass")

REFRESH_LOCK_KEY = 0x6A6F6273  # one refresh at a time across every process
_refreshing = threading.Lock()


def stats(now: datetime, policy: StatsPolicy | None = None) -> Stats:
    """The reference's stats, without reading every finished row of a large table.

    Below ``policy.exact_below_rows`` (the planner's estimate; unknown counts as small) every
    figure is exact. Above it, succeeded and failed (and so the total) come from
    ``jobs_finished_counts``, refreshed in the background once older than
    ``policy.refresh_seconds``; :attr:`Stats.finished_counted_at` says how old they are.
    """
    policy = policy or _app_policy()
    with _connect() as conn:
        if _is_large(conn, policy):
            return _large_table_stats(conn, now, policy)
        row = conn.execute(STATS_SQL, {"now": now}).mappings().one()
    return Stats(
        total=row["total"],
        by_status={status: row[status] for status in STATUSES},
        overdue_running=row["overdue_running"],
        retries_pending=row["retries_pending"],
        oldest_queued_at=row["oldest_queued_at"],
    )


def _is_large(conn: Connection, policy: StatsPolicy) -> bool:
    estimated = conn.execute(ESTIMATED_ROWS_SQL).scalar_one()
    return max(estimated, 0) >= policy.exact_below_rows  # -1: never analysed, so small


def _large_table_stats(conn: Connection, now: datetime, policy: StatsPolicy) -> Stats:
    row = conn.execute(LIVE_STATS_SQL, {"now": now}).mappings().one()
    if (now - row["counted_at"]).total_seconds() > policy.refresh_seconds:
        refresh_finished_counts(wait=False)
    by_status = {status: row[status] for status in STATUSES}
    return Stats(
        total=sum(by_status.values()),
        by_status=by_status,
        overdue_running=row["overdue_running"],
        retries_pending=row["retries_pending"],
        oldest_queued_at=row["oldest_queued_at"],
        finished_counted_at=row["counted_at"],
    )


def refresh_finished_counts(*, wait: bool = True) -> bool:
    """Recount finished jobs into ``jobs_finished_counts``; False if a refresh was running.

    ``wait=False`` starts it on a background thread and returns at once. Concurrent refresh:
    readers keep the old figures until the new ones are in. An advisory lock keeps several
    dashboard processes from counting at the same time.
    """
    if not _refreshing.acquire(blocking=False):
        return False
    app = current_app._get_current_object()  # type: ignore[attr-defined]

    def refresh() -> bool:
        try:
            # A transaction-level try-lock (issue 19): released by the commit, so it also works
            # through a transaction pooler, where a session lock would stay on a server connection.
            with app.app_context(), db.engine.begin() as conn:
                if not conn.execute(
                    text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": REFRESH_LOCK_KEY}
                ).scalar():
                    return False
                conn.execute(text("REFRESH MATERIALIZED VIEW CONCURRENTLY jobs_finished_counts"))
                return True
        finally:
            _refreshing.release()

    if wait:
        return refresh()
    threading.Thread(target=refresh, name="stats-refresh", daemon=True).start()
    return True


def database_ok() -> None:
    """Raise if the database cannot answer a trivial query."""
    with _connect() as conn:
        conn.execute(text("SELECT 1"))


# --- Dashboard reads -------------------------------------------------------------------------


@dataclass(frozen=True)
class MinuteCount:
    minute: datetime  # start of the minute, UTC
    succeeded: int
    failed: int


FINISHED_PER_MINUTE_SQL = text(
    """
    SELECT date_trunc('minute', created_at) AS minute,
           count(*) FILTER (WHERE type = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE type = 'failed') AS failed
    FROM jobs_jobevent
    WHERE created_at >= :since AND created_at < :until AND type IN ('succeeded', 'failed')
    GROUP BY 1
    ORDER BY 1
    """
)


def finished_per_minute(since: datetime, until: datetime) -> list[MinuteCount]:
    """Jobs that reached ``succeeded`` or ``failed`` per minute in ``[since, until)``.

    Read from the ``succeeded`` and ``failed`` events, not from ``jobs_job.finished_at``:
    a retried job loses its ``finished_at``, its events stay. Minutes without finishes are
    absent. Index: jobs_jobevent_created_at_idx (a range over the window only).
    """
    with _connect() as conn:
        rows = conn.execute(FINISHED_PER_MINUTE_SQL, {"since": since, "until": until}).mappings().all()
    return [MinuteCount(minute=r["minute"], succeeded=r["succeeded"], failed=r["failed"]) for r in rows]


@dataclass(frozen=True)
class WorkerSeen:
    worker_id: str
    last_seen: datetime | None  # newest event of this worker in the window; None: only a lock
    events: int  # events in the window
    running: int  # jobs it holds a lease on now


RECENT_WORKER_EVENTS_SQL = text(
    """
    SELECT worker_id, max(created_at) AS last_seen, count(*) AS events
    FROM jobs_jobevent
    WHERE created_at >= :since AND worker_id IS NOT NULL
    GROUP BY worker_id
    """
)

LOCK_HOLDERS_SQL = text(
    """
    SELECT locked_by AS worker_id, count(*) AS running
    FROM jobs_job
    WHERE status = 'running'
    GROUP BY locked_by
    """
)


def recent_workers(since: datetime, *, limit: int = 50) -> list[WorkerSeen]:
    """Workers that wrote an event since ``since`` or hold a lease now, newest first.

    There is no worker table: a worker is known by the ``worker_id`` on its events and the
    ``locked_by`` of the jobs it runs. An idle worker writes nothing and so is not listed.
    Indexes: jobs_jobevent_created_at_idx (the window), job_timeout_idx (its predicate is
    ``status = 'running'``, so it covers exactly the running jobs).
    """
    with _connect() as conn:
        seen = conn.execute(RECENT_WORKER_EVENTS_SQL, {"since": since}).mappings().all()
        holders = conn.execute(LOCK_HOLDERS_SQL).mappings().all()
    running = {r["worker_id"]: r["running"] for r in holders}
    workers = {
        r["worker_id"]: WorkerSeen(
            worker_id=r["worker_id"],
            last_seen=r["last_seen"],
            events=r["events"],
            running=running.get(r["worker_id"], 0),
        )
        for r in seen
    }
    for worker_id, count in running.items():
        workers.setdefault(worker_id, WorkerSeen(worker_id, None, 0, count))
    ordered = sorted(
        workers.values(),
        key=lambda w: (w.last_seen is not None, w.last_seen or datetime.min.replace(tzinfo=since.tzinfo)),
        reverse=True,
    )
    return ordered[:limit]


LATEST_FAILURES_SQL = text(
    """
    SELECT j.id, j.type, left(j.payload::text, :preview) AS payload, j.status, j.priority,
           j.available_at, j.attempts, j.max_attempts, j.idempotency_key, j.locked_by,
           j.locked_until, j.last_error, left(j.result::text, :preview) AS result, j.created_at,
           j.updated_at, j.finished_at, e.id AS failed_event_id, e.created_at AS failed_at
    FROM (
        SELECT id, job_id, created_at FROM jobs_jobevent
        WHERE type = 'failed'
        ORDER BY id DESC
        LIMIT :scan
    ) AS e
    JOIN jobs_job AS j ON j.id = e.job_id AND j.status = 'failed'
    ORDER BY e.id DESC
    """
)


@dataclass(frozen=True)
class Failure:
    job: JobRecord
    failed_at: datetime


def latest_failures(limit: int = 10) -> list[Failure]:
    """The jobs that failed most recently and are still failed, newest failure first (payload
    and result as :data:`PREVIEW_CHARS` characters of their JSON text, as in :func:`list_jobs`).

    Walks the newest ``failed`` events (a bounded scan, not every failed job) and keeps the
    jobs still in ``failed``; a job that failed twice is listed once. Index: job_event_id_idx
    read backwards (or jobs_jobevent_type_idx), then jobs_job's primary key.
    """
    with _connect() as conn:
        params = {"scan": limit * 4, "preview": PREVIEW_CHARS}
        rows = conn.execute(LATEST_FAILURES_SQL, params).mappings().all()
    failures: dict[uuid.UUID, Failure] = {}
    for row in rows:
        if row["id"] not in failures:
            failures[row["id"]] = Failure(job=JobRecord.from_row(row), failed_at=row["failed_at"])
    return list(failures.values())[:limit]


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
    with _connect() as conn:
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
    with _connect() as conn:
        row = conn.execute(query).mappings().first()
    return EventRecord.from_row(row) if row is not None else None
