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

from sqlalchemy import Connection

from ..reading import in_index_order, reading
from ..sql import query
from .capacity import capacity
from .stats import DEFAULT_POLICY, FinishedTotals, StatsPolicy
from .stats import finished_totals as stats_finished_totals

TYPES_CHECKED = 50
QUEUES_CHECKED = 500  # queues with queued jobs looked at (read_queues.QUEUES_SHOWN)
TYPE_PROBE = 1000  # due jobs of a type looked at for one outside the paused queues


READY_TYPES_SQL = query("ready_types")
READY_QUEUES_SQL = query("ready_queues")
OPEN_TYPES_SQL = query("open_types")


def finished_totals(now: datetime, policy: StatsPolicy = DEFAULT_POLICY) -> FinishedTotals | None:
    """The finished totals (``stats.finished_totals``): exact on a small table; on a large one
    the cached ones with the time they were counted (the overview shows their age), recounted
    in the background (``policy.on_stale``) once older than ``policy.refresh_seconds``."""
    with reading() as conn:
        return stats_finished_totals(conn, now, policy)


@dataclass(frozen=True)
class ReadyQueue:
    name: str
    paused: bool


def ready_queues(conn: Connection, now: datetime) -> list[ReadyQueue]:
    """The queues with a job due now (first run or retry), by name, each with whether it is
    paused; at most :data:`QUEUES_CHECKED` queues with queued jobs are looked at."""
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
    with reading() as conn:  # one read connection for the queues and the types
        ready = ready_queues(conn, now)
        waiting = [q.name for q in ready if not q.paused]
        if not waiting:
            return None
        types = list(conn.execute(READY_TYPES_SQL, {"now": now, "types": TYPES_CHECKED}).scalars())
    paused = [q.name for q in ready if q.paused]
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
