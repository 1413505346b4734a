"""What the overview and ``/api/jobs/stats/`` read: status counts, the finished totals (also
``/metrics``'), the job types and the latest failures; their statements are ``stats.sql``.

Each function names the index it relies on. Counting policy (exact below a size, cached
finished totals above it) comes in as an argument, :class:`StatsPolicy`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, TextClause

from ...config import Settings
from ...config.rules import LIVE_COUNT_CAP, PREVIEW_CHARS
from ..reading import reading
from ..records import JobRecord
from ..sql import query
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
    # the four stored statuses (a cancelled job is failed there); pages and metrics show the two apart.
    cancelled: int = 0
    # Of the queued jobs, those waiting for their parents (``available_at`` at
    # ``states.WAITING_AT``): never due until released. Still counted in ``by_status["queued"]``.
    waiting: int = 0

    @property
    def failures(self) -> int:
        """Failed jobs that were not cancelled: what failed by running out of attempts."""
        return self.by_status.get("failed", 0) - self.cancelled

    def as_dict(self) -> dict[str, Any]:
        """The API's ``/api/jobs/stats/`` shape (without ``finished_counted_at``): the
        reference's fields, then ``waiting``."""
        return {
            "total": self.total,
            "by_status": dict(self.by_status),
            "overdue_running": self.overdue_running,
            "retries_pending": self.retries_pending,
            "oldest_queued_at": self.oldest_queued_at,
            "waiting": self.waiting,
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


STATS_SQL = query("stats_exact")
JOB_TYPES_SQL = query("job_types")
LIVE_STATS_SQL = query("live_stats")
# Past the cap, the planner's estimate of the same predicate (from the column statistics).
ESTIMATES = {
    "queued": query("estimate_queued"),
    "running": query("estimate_running"),
    "overdue_running": query("estimate_overdue_running"),
    "retries_pending": query("estimate_retries_pending"),
    "waiting": query("estimate_waiting"),
}
ESTIMATED_ROWS_SQL = query("estimated_rows")
FINISHED_EXACT_SQL = query("finished_exact")
FINISHED_CACHED_SQL = query("finished_cached")
DATABASE_OK_SQL = query("database_ok")
LATEST_FAILURES_SQL = query("latest_failures")
FAILURES_SCANNED = 1_000  # failed jobs read at most for the latest failures, cancels included


def estimate(conn: Connection, probe: TextClause) -> int:
    """The planner's estimate of the rows ``probe`` (an ``estimate_*`` statement: no
    parameters) would return, asked with EXPLAIN: no row is read."""
    plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {probe.text}").scalar_one()
    return int(plan[0]["Plan"]["Plan Rows"])


def stats(now: datetime, policy: StatsPolicy = DEFAULT_POLICY) -> Stats:
    """Counts by status, overdue leases, pending retries, waiting jobs and the oldest queued
    job, without reading every finished row of a large table.

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
        waiting=row["waiting"],
    )


def is_large(conn: Connection, policy: StatsPolicy) -> bool:
    estimated: int = conn.execute(ESTIMATED_ROWS_SQL).scalar_one()
    return max(estimated, 0) >= policy.exact_below_rows  # -1: never analysed, so small


def large_table_stats(conn: Connection, now: datetime, policy: StatsPolicy) -> Stats:
    row = dict(conn.execute(LIVE_STATS_SQL, {"now": now, "cap": LIVE_COUNT_CAP + 1}).mappings().one())
    for name, probe in ESTIMATES.items():
        if row[name] > LIVE_COUNT_CAP:
            row[name] = max(estimate(conn, probe), row[name])
    recount_if_stale(row["counted_at"], now, policy)
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
        waiting=row["waiting"],
    )


@dataclass(frozen=True)
class FinishedTotals:
    succeeded: int
    failed: int  # failed for good, not cancelled
    cancelled: int  # failed because an operator cancelled them
    counted_at: datetime | None = None  # None: counted now, exactly

    def as_dict(self) -> dict[str, int]:
        return {"succeeded": self.succeeded, "failed": self.failed, "cancelled": self.cancelled}


def finished_totals(conn: Connection, now: datetime, policy: StatsPolicy) -> FinishedTotals | None:
    """The succeeded, failed and cancelled totals, by ``policy``: below
    ``policy.exact_below_rows`` (the planner's estimate, :func:`is_large`) counted now; above,
    the cached ``jobs_finished_counts`` (``None`` if it has no row), recounted in the background
    once older than ``policy.refresh_seconds`` (:func:`recount_if_stale`). The overview shows
    their age (``reads/health.py``); a scrape leaves out totals too old (``reads/metrics.py``)."""
    if not is_large(conn, policy):
        row = conn.execute(FINISHED_EXACT_SQL).mappings().one()
        return FinishedTotals(row["succeeded"], row["failed"], row["cancelled"])
    cached = conn.execute(FINISHED_CACHED_SQL).mappings().one_or_none()
    if cached is None:
        return None
    recount_if_stale(cached["counted_at"], now, policy)
    return FinishedTotals(cached["succeeded"], cached["failed"], cached["cancelled"], cached["counted_at"])


def recount_if_stale(counted_at: datetime, now: datetime, policy: StatsPolicy) -> None:
    """Start a recount (``policy.on_stale``) of cached totals counted at ``counted_at`` once
    they are older than ``policy.refresh_seconds``; reads never write."""
    if (now - counted_at).total_seconds() > policy.refresh_seconds and policy.on_stale is not None:
        policy.on_stale()


def database_ok() -> None:
    """Raise if the database cannot answer a trivial query."""
    with reading() as conn:
        conn.execute(DATABASE_OK_SQL)


@dataclass(frozen=True)
class Failure:
    job: JobRecord
    failed_at: datetime


def latest_failures(limit: int = 10) -> list[Failure]:
    """The jobs that failed most recently and are still failed, not cancelled, newest failure
    first (payload and result as :data:`~dashboard.limits.PREVIEW_CHARS` characters of their
    JSON text, as on the job list: ``reads/columns.py``); a job failed when it finished.

    Reads the newest failed jobs by when they finished, however long ago the last failure
    was, and at most :data:`FAILURES_SCANNED` of them: after a mass cancel (cancelled jobs are
    failed too) the older failures are left unread, and the list is shorter.
    """
    with reading() as conn:
        params = {"limit": limit, "scan": FAILURES_SCANNED, "preview": PREVIEW_CHARS}
        rows = conn.execute(LATEST_FAILURES_SQL, params).mappings().all()
    return [Failure(job=JobRecord.from_row(row), failed_at=row["failed_at"]) for row in rows]
