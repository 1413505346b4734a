"""Two reads every dashboard page or the overview needs, each a few index probes:

- :func:`finished_totals`: succeeded, failed and cancelled jobs, exact on a small table and from
  ``jobs_finished_counts`` on a large one (as ``read_stats.stats`` decides, by ``StatsPolicy``);
  the overview takes its live figures from ``read_overview.queue_detail`` instead of counting
  queued and running jobs a second time.
- :func:`unserved`: is work ready that nobody will run? The job types that have due queued jobs
  (a skip scan of ``job_queued_type_idx``: one descent per queued type, at most
  :data:`TYPES_CHECKED` of them) against the live workers' heartbeats (``store/workers.py``):
  none alive, or none with a handler for the type. The banner on every page says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text

from .capacity import capacity
from .read_stats import DEFAULT_POLICY, StatsPolicy, is_large
from .read_timeout import reading

TYPES_CHECKED = 50


@dataclass(frozen=True)
class FinishedTotals:
    succeeded: int
    failed: int  # failed for good, not cancelled
    cancelled: int  # failed because an operator cancelled them
    counted_at: datetime | None = None  # None: counted now, exactly


# Small tables: one pass over the finished rows (job_finished_idx).
EXACT_SQL = text(
    """
    SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE status = 'failed' AND cancelled_at IS NULL) AS failed,
           count(*) FILTER (WHERE status = 'failed' AND cancelled_at IS NOT NULL) AS cancelled
    FROM jobs_job WHERE status IN ('succeeded', 'failed')
    """
)
CACHED_SQL = text("SELECT succeeded, failed, cancelled, counted_at FROM jobs_finished_counts")


def finished_totals(now: datetime, policy: StatsPolicy = DEFAULT_POLICY) -> FinishedTotals:
    """The finished totals; on a large table the cached ones, recounted in the background
    (``policy.on_stale``) once older than ``policy.refresh_seconds``."""
    with reading() as conn:
        if not is_large(conn, policy):
            row = conn.execute(EXACT_SQL).mappings().one()
            return FinishedTotals(row["succeeded"], row["failed"], row["cancelled"])
        row = conn.execute(CACHED_SQL).mappings().one()
    if (now - row["counted_at"]).total_seconds() > policy.refresh_seconds and policy.on_stale:
        policy.on_stale()
    return FinishedTotals(row["succeeded"], row["failed"], row["cancelled"], row["counted_at"])


# The distinct types of queued jobs, one descent of job_queued_type_idx each, keeping those
# with a job due now (first run or retry: two probes of the same index).
READY_TYPES_SQL = text(
    """
    WITH RECURSIVE queued AS (
        (SELECT type FROM jobs_job WHERE status = 'queued' ORDER BY type LIMIT 1)
        UNION ALL
        SELECT (SELECT j.type FROM jobs_job AS j
                WHERE j.status = 'queued' AND j.type > queued.type ORDER BY j.type LIMIT 1)
        FROM queued WHERE queued.type IS NOT NULL
    )
    SELECT type FROM (SELECT type FROM queued WHERE type IS NOT NULL LIMIT :types) AS t
    WHERE EXISTS (SELECT 1 FROM jobs_job WHERE status = 'queued' AND type = t.type
                  AND least(attempts, 1) = 0 AND available_at <= :now)
       OR EXISTS (SELECT 1 FROM jobs_job WHERE status = 'queued' AND type = t.type
                  AND least(attempts, 1) = 1 AND available_at <= :now)
    ORDER BY type
    """
)


@dataclass(frozen=True)
class Unserved:
    """Ready work that no live worker will run: ``kind`` ``no_worker`` (none alive) or
    ``no_handler`` (live workers, none with a handler for ``types``)."""

    kind: str
    types: list[str]  # job types with due jobs that nobody runs
    alive: int  # live worker processes
    live_types: list[str]  # the types they have handlers for


def unserved(now: datetime) -> Unserved | None:
    """``None`` when every job type with due jobs has a live worker that handles it (or none
    is due)."""
    with reading() as conn:
        ready = list(conn.execute(READY_TYPES_SQL, {"now": now, "types": TYPES_CHECKED}).scalars())
    if not ready:
        return None
    live = capacity(now)
    if live.alive == 0:
        return Unserved("no_worker", ready, 0, [])
    missing = [t for t in ready if t not in live.types]
    if not missing:
        return None
    return Unserved("no_handler", missing, live.alive, sorted(live.types))
