"""What the overview and ``/api/jobs/stats/`` read: status counts and the latest failures.

Each function names the index it relies on. Counting policy (exact below a size, cached
finished totals above it) comes in as an argument, :class:`StatsPolicy`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from ...config import Settings
from ...limits import LIVE_COUNT_CAP, PREVIEW_CHARS
from ..reading import reading
from ..records import JobRecord
from ..states import STATUSES


@dataclass(frozen=True)
class Stats:
    total: int
    by_status: dict[str, int]
    overdue_running: int
    retries_pending: int
    oldest_queued_at: datetime | None
    # When the succeeded/failed figures (and so the total) were counted; None when exact.
    finished_counted_at: datetime | None = None
    counts_capped: bool = False  # a live count went past LIVE_COUNT_CAP: estimated
    # Of the failed jobs, those an operator cancelled (``cancelled_at``): ``by_status`` counts
    # the four stored statuses, as the reference's stats do; pages and metrics show the two apart.
    cancelled: int = 0

    @property
    def failures(self) -> int:
        """Failed jobs that were not cancelled: what failed by running out of attempts."""
        return self.by_status.get("failed", 0) - self.cancelled

    def as_dict(self) -> dict[str, Any]:
        """The API's ``/api/jobs/stats/`` shape (without ``finished_counted_at``)."""
        return {
            "total": self.total,
            "by_status": dict(self.by_status),
            "overdue_running": self.overdue_running,
            "retries_pending": self.retries_pending,
            "oldest_queued_at": self.oldest_queued_at,
        }


@dataclass(frozen=True)
class StatsPolicy:
    """Exact counts below ``exact_below_rows`` (estimated); above, cached finished totals.

    ``on_stale`` is called when the cached totals are older than ``refresh_seconds``
    (the web process points it at a background recount, ``ops/recount.py``); reads never write.
    """

    exact_below_rows: int
    refresh_seconds: float
    on_stale: Callable[[], object] | None = None

    @classmethod
    def from_settings(cls, settings: Settings, on_stale: Callable[[], object] | None = None) -> StatsPolicy:
        return cls(settings.stats_exact_below_rows, settings.stats_refresh_seconds, on_stale)


DEFAULT_POLICY = StatsPolicy.from_settings(Settings())  # the defaults, written once in config.py


# Exact, in one pass over jobs_job: cheap on a small table, O(rows) on a large one.
STATS_SQL = text(
    """
    SELECT
        count(*) AS total,
        count(*) FILTER (WHERE status = 'queued') AS queued,
        count(*) FILTER (WHERE status = 'running') AS running,
        count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
        count(*) FILTER (WHERE status = 'failed') AS failed,
        count(*) FILTER (WHERE status = 'failed' AND cancelled_at IS NOT NULL) AS cancelled,
        count(*) FILTER (WHERE status = 'running' AND locked_until < :now) AS overdue_running,
        count(*) FILTER (WHERE status = 'queued' AND attempts > 0) AS retries_pending,
        min(created_at) FILTER (WHERE status = 'queued') AS oldest_queued_at
    FROM jobs_job
    """
)

# The distinct job types, by a skip scan of job_type_created_idx: one index descent per type
# instead of reading every row (cost: docs/benchmarks.md). Statements that need the types start
# with it.
TYPES_CTE = """
    WITH RECURSIVE types AS (
        (SELECT type FROM jobs_job ORDER BY type LIMIT 1)
        UNION ALL
        SELECT (SELECT j.type FROM jobs_job j WHERE j.type > types.type ORDER BY j.type LIMIT 1)
        FROM types WHERE types.type IS NOT NULL
    )
"""
JOB_TYPES_SQL = text(TYPES_CTE + "SELECT type FROM types WHERE type IS NOT NULL")

# Large tables: live figures counted up to a cap (then the planner's estimate), finished
# totals from jobs_finished_counts. Indexes: job_claim_idx (queued), job_queued_idx
# (``least(attempts, 1) = 1``: retries), job_timeout_idx (running, overdue), and a skip scan of
# job_type_created_idx for the oldest queued job (one descent per type, not per queued row).
# Each capped count walks its index in the index's own order, so it stops at the cap: a bitmap
# scan would first read every entry of the range, then up to the cap's heap pages (queued rows
# spread through a large table: 93 ms for the queued count of a 100,000-job backlog, against
# about 4 ms walked in order; docs/benchmarks.md).
LIVE_STATS_SQL = text(
    TYPES_CTE
    + """
    SELECT
        (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued'
            ORDER BY priority DESC, available_at, created_at, id LIMIT :cap) AS q) AS queued,
        (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'running'
            ORDER BY locked_until LIMIT :cap) AS r) AS running,
        (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'running' AND locked_until < :now
            ORDER BY locked_until LIMIT :cap) AS o) AS overdue_running,
        (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued'
            AND least(attempts, 1) = 1 ORDER BY available_at LIMIT :cap) AS p) AS retries_pending,
        (SELECT min(first.created_at) FROM types CROSS JOIN LATERAL (
            SELECT created_at FROM jobs_job
            WHERE jobs_job.type = types.type AND status = 'queued'
            ORDER BY created_at LIMIT 1) AS first) AS oldest_queued_at,
        f.succeeded, f.failed + f.cancelled AS failed, f.cancelled, f.counted_at
    FROM jobs_finished_counts AS f
    """
)
# Past the cap, the planner's estimate of the same predicate (from the column statistics).
ESTIMATES = {
    "queued": "SELECT 1 FROM jobs_job WHERE status = 'queued'",
    "running": "SELECT 1 FROM jobs_job WHERE status = 'running'",
    "overdue_running": "SELECT 1 FROM jobs_job WHERE status = 'running' AND locked_until < now()",
    "retries_pending": "SELECT 1 FROM jobs_job WHERE status = 'queued' AND least(attempts, 1) = 1",
}


def estimate(conn: Connection, probe: str) -> int:
    plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {probe}").scalar_one()
    return int(plan[0]["Plan"]["Plan Rows"])


# The planner's row estimate (kept by autovacuum's ANALYZE): free, and plenty to choose by.
ESTIMATED_ROWS_SQL = text("SELECT reltuples::bigint FROM pg_class WHERE oid = 'jobs_job'::regclass")


def stats(now: datetime, policy: StatsPolicy = DEFAULT_POLICY) -> Stats:
    """Counts by status, overdue leases, pending retries and the oldest queued job, without
    reading every finished row of a large table.

    Below ``policy.exact_below_rows`` (the planner's estimate; unknown counts as small) every
    figure is exact. Above it, succeeded and failed (and so the total) come from
    ``jobs_finished_counts``, refreshed in the background once older than
    ``policy.refresh_seconds`` (``policy.on_stale``); :attr:`Stats.finished_counted_at` says
    how old they are.
    """
    with reading() as conn:
        if is_large(conn, policy):
            return large_table_stats(conn, now, policy)
        row = conn.execute(STATS_SQL, {"now": now}).mappings().one()
    return Stats(
        total=row["total"],
        by_status={status: row[status] for status in STATUSES},
        overdue_running=row["overdue_running"],
        retries_pending=row["retries_pending"],
        oldest_queued_at=row["oldest_queued_at"],
        cancelled=row["cancelled"],
    )


def is_large(conn: Connection, policy: StatsPolicy) -> bool:
    estimated: int = conn.execute(ESTIMATED_ROWS_SQL).scalar_one()
    return max(estimated, 0) >= policy.exact_below_rows  # -1: never analysed, so small


def large_table_stats(conn: Connection, now: datetime, policy: StatsPolicy) -> Stats:
    row = dict(conn.execute(LIVE_STATS_SQL, {"now": now, "cap": LIVE_COUNT_CAP + 1}).mappings().one())
    for name, probe in ESTIMATES.items():
        if row[name] > LIVE_COUNT_CAP:
            row[name] = max(estimate(conn, probe), row[name])
    if (now - row["counted_at"]).total_seconds() > policy.refresh_seconds and policy.on_stale:
        policy.on_stale()
    by_status = {status: row[status] for status in STATUSES}
    return Stats(
        total=sum(by_status.values()),
        by_status=by_status,
        overdue_running=row["overdue_running"],
        retries_pending=row["retries_pending"],
        oldest_queued_at=row["oldest_queued_at"],
        counts_capped=any(row[name] > LIVE_COUNT_CAP for name in ESTIMATES),
        finished_counted_at=row["counted_at"],
        cancelled=row["cancelled"],
    )


def database_ok() -> None:
    """Raise if the database cannot answer a trivial query."""
    with reading() as conn:
        conn.execute(text("SELECT 1"))


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
    JOIN jobs_job AS j ON j.id = e.job_id AND j.status = 'failed' AND j.cancelled_at IS NULL
    ORDER BY e.id DESC
    """
)


@dataclass(frozen=True)
class Failure:
    job: JobRecord
    failed_at: datetime


def latest_failures(limit: int = 10) -> list[Failure]:
    """The jobs that failed most recently and are still failed, newest failure first (payload
    and result as :data:`~dashboard.limits.PREVIEW_CHARS` characters of their JSON text, as on
    the job list: ``reads/columns.py``).

    Walks the newest ``failed`` events (a bounded scan, not every failed job) and keeps the
    jobs still in ``failed`` and not cancelled since; a job that failed twice is listed once.
    Index: job_event_id_idx read backwards (or jobs_jobevent_type_idx), then jobs_job's primary key.
    """
    with reading() as conn:
        params = {"scan": limit * 4, "preview": PREVIEW_CHARS}
        rows = conn.execute(LATEST_FAILURES_SQL, params).mappings().all()
    failures: dict[uuid.UUID, Failure] = {}
    for row in rows:
        if row["id"] not in failures:
            failures[row["id"]] = Failure(job=JobRecord.from_row(row), failed_at=row["failed_at"])
    return list(failures.values())[:limit]
