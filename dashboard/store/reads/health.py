"""Two reads every dashboard page or the overview needs, each a few index probes:

- :func:`finished_totals`: succeeded, failed and cancelled jobs, exact on a small table and from
  ``jobs_finished_counts`` on a large one (as ``read_stats.stats`` decides, by ``StatsPolicy``);
  the overview takes its live figures from ``read_overview.queue_detail`` instead of counting
  queued and running jobs a second time.
- :func:`unserved`: is work ready that nobody will run? The queues that have due queued jobs
  (:func:`ready_queues`: a skip scan of ``job_queued_queue_idx``, one descent per queue with
  queued jobs, at most :data:`QUEUES_CHECKED`, and two probes each), the paused ones left out
  (they hold their jobs on purpose), and the job types with due jobs (a skip scan of
  ``job_queued_type_idx``: one descent per queued type, at most :data:`TYPES_CHECKED`), against
  the live workers' heartbeats (``store/reads/capacity.py``, a few rows): none alive, none serving a
  queue, or none with a handler for a type. The banner on every page says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import text

from ..reading import in_index_order, reading
from .capacity import capacity
from .stats import DEFAULT_POLICY, StatsPolicy, is_large

TYPES_CHECKED = 50
QUEUES_CHECKED = 500  # queues with queued jobs looked at (read_queues.QUEUES_SHOWN)
TYPE_PROBE = 1000  # due jobs of a type looked at for one outside the paused queues


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


# The distinct queues of queued jobs, one descent of job_queued_queue_idx each, keeping those
# with a job due now (first run or retry: two probes of the same index), each with its pause.
READY_QUEUES_SQL = text(
    """
    WITH RECURSIVE queued AS (
        (SELECT queue FROM jobs_job WHERE status = 'queued' ORDER BY queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM jobs_job AS j
                WHERE j.status = 'queued' AND j.queue > queued.queue ORDER BY j.queue LIMIT 1)
        FROM queued WHERE queued.queue IS NOT NULL
    )
    SELECT n.queue AS name, COALESCE(q.paused, false) AS paused
    FROM (SELECT queue FROM queued WHERE queue IS NOT NULL LIMIT :queues) AS n
    LEFT JOIN jobs_queue AS q ON q.name = n.queue
    WHERE EXISTS (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = n.queue
                  AND least(attempts, 1) = 0 AND available_at <= :now)
       OR EXISTS (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = n.queue
                  AND least(attempts, 1) = 1 AND available_at <= :now)
    ORDER BY n.queue
    """
)

# Of :types, those with a due job outside the :paused queues, among each type's oldest :probe
# due jobs of each range of job_queued_type_idx: bounded, however many jobs a paused queue holds
# (a type whose oldest :probe due jobs all wait in paused queues counts as held by the pause).
OPEN_TYPES_SQL = text(
    """
    SELECT t.type FROM unnest(CAST(:types AS text[])) AS t(type)
    WHERE EXISTS (SELECT 1 FROM (SELECT queue FROM jobs_job WHERE status = 'queued' AND type = t.type
                                 AND least(attempts, 1) = 0 AND available_at <= :now
                                 ORDER BY available_at LIMIT :probe) AS j
                  WHERE j.queue <> ALL (CAST(:paused AS text[])))
       OR EXISTS (SELECT 1 FROM (SELECT queue FROM jobs_job WHERE status = 'queued' AND type = t.type
                                 AND least(attempts, 1) = 1 AND available_at <= :now
                                 ORDER BY available_at LIMIT :probe) AS j
                  WHERE j.queue <> ALL (CAST(:paused AS text[])))
    ORDER BY t.type
    """
)


@dataclass(frozen=True)
class ReadyQueue:
    name: str
    paused: bool


def ready_queues(now: datetime) -> list[ReadyQueue]:
    """The queues with a job due now (first run or retry), by name, each with whether it is
    paused; at most :data:`QUEUES_CHECKED` queues with queued jobs are looked at."""
    with reading() as conn:
        rows = conn.execute(READY_QUEUES_SQL, {"now": now, "queues": QUEUES_CHECKED}).mappings().all()
    return [ReadyQueue(row["name"], row["paused"]) for row in rows]


@dataclass(frozen=True)
class Unserved:
    """Ready work that no live worker will run (the paused queues' left out): ``kind``
    ``no_worker`` (none alive), ``no_queue_worker`` (live workers, none serving ``queues``) or
    ``no_handler`` (live workers, none with a handler for ``types``)."""

    kind: str
    types: list[str]  # job types with due jobs that nobody runs (with no_worker: every one)
    alive: int  # live worker processes
    live_types: list[str]  # the types they have handlers for
    queues: list[str] = field(default_factory=list)  # queues with due jobs that no live worker serves
    served: list[str] | None = None  # the queues the live workers serve; None: every queue


def unserved(now: datetime) -> Unserved | None:
    """``None`` when every queue with due jobs is paused, or served by a live worker, and every
    job type with due jobs (outside paused queues) has a live worker that handles it."""
    ready = ready_queues(now)
    waiting = [q.name for q in ready if not q.paused]
    if not waiting:
        return None
    paused = [q.name for q in ready if q.paused]
    with reading() as conn:
        types = list(conn.execute(READY_TYPES_SQL, {"now": now, "types": TYPES_CHECKED}).scalars())
    live = capacity(now)
    if live.alive == 0:
        return Unserved("no_worker", _outside(types, paused, now), 0, [], queues=waiting)
    queues = [name for name in waiting if not live.serves(name)]
    missing = _outside([t for t in types if t not in live.types], paused, now)
    if not queues and not missing:
        return None
    kind = "no_queue_worker" if queues else "no_handler"
    return Unserved(kind, missing, live.alive, sorted(live.types), queues=queues, served=live.served)


def _outside(types: list[str], paused: list[str], now: datetime) -> list[str]:
    """Of ``types``, those with due jobs outside the ``paused`` queues (``OPEN_TYPES_SQL``)."""
    if not types or not paused:
        return types
    params = {"types": types, "paused": paused, "now": now, "probe": TYPE_PROBE}
    with reading() as conn, in_index_order(conn):
        return list(conn.execute(OPEN_TYPES_SQL, params).scalars())
