"""What ``GET /metrics`` reads: the queue's figures in one snapshot, bounded at 10M jobs.

Every figure is read through a partial index and bounded:

- queued jobs: one walk of ``job_claim_idx`` (queued rows only, in claim order), at most
  :data:`COUNT_CAP` entries, grouped by type into ready now / scheduled later / oldest ready;
- waiting jobs (queued for their parents, at ``states.WAITING_AT``): the point at that
  instant of ``job_queued_idx``'s two ranges, at most :data:`COUNT_CAP` entries, by type
  (``waiting_by_type``). They are also within the queued walk's *scheduled*;
- running jobs: one walk of ``job_timeout_idx`` (running rows only, the oldest leases first),
  at most :data:`COUNT_CAP`, grouped by type into running / overdue (lease expired);
- succeeded, failed and cancelled totals, by the stats' policy (:func:`finished_totals`):
  counted exactly below ``STATS_EXACT_BELOW_ROWS``; above it, the one-row
  ``jobs_finished_counts`` view, recounted in the background (the policy's ``on_stale``) once
  older than ``STATS_REFRESH_SECONDS``, and left out of a snapshot once older than twice that:
  a scrape never publishes a figure it has not computed (a view last counted before an idle
  spell would say 0 finished jobs);
- the same ready / scheduled / running figures per queue (the same walks, and
  ``job_timeout_idx`` again for running), and which queues are paused (``jobs_queue``);
- worker processes alive: the recent rows of the small ``jobs_worker`` heartbeat table;
- each active schedule's next run, last fire and fired / skipped counters: the small
  ``jobs_schedule`` table (``schedule_figures``), one row per schedule the code declares.

When a walk reaches the cap, its figures are lower bounds taken over the first jobs in claim
(or lease) order, and :attr:`Snapshot.capped` says so. Turning a snapshot into metric families
(and caching it) is ``ops/web_metrics.py``'s; the HTTP view is ``web/metrics.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import Connection

from ...extensions import engine
from .. import workers
from ..sql import query
from .overview import RUNNING_SQL
from .stats import StatsPolicy
from .stats import finished_totals as stats_finished_totals

SCHEDULE_FIGURES = query("schedule_figures")
SCHEDULES_MAX = 500  # series per schedule figure at most

COUNT_CAP = 100_000

QUEUED_SQL = query("queued_by_type_and_queue")
WAITING_SQL = query("waiting_by_type")
RUNNING_BY_QUEUE_SQL = query("running_by_queue")
PAUSED_SQL = query("paused_queues")
FINISHED = ("succeeded", "failed", "cancelled")


@dataclass
class Snapshot:
    """The figures of one scrape: per type (``ready``, ``scheduled``, ``oldest_ready_age``,
    ``waiting``, ``running``, ``overdue``), which walks hit their cap, the finished totals and their age,
    and the live worker processes."""

    taken_at: datetime
    by_type: dict[str, dict[str, float]] = field(default_factory=dict)
    by_queue: dict[str, dict[str, float]] = field(default_factory=dict)  # ready, scheduled, running, paused
    capped: dict[str, bool] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)
    finished_counted_at: datetime | None = None
    workers_alive: int | None = None
    schedules: list[dict[str, object]] = field(default_factory=list)

    def total(self, figure: str) -> float:
        return sum(row.get(figure, 0) for row in self.by_type.values())


def read_snapshot(policy: StatsPolicy, now: datetime | None = None, cap: int = COUNT_CAP) -> Snapshot:
    """Read the figures now (app context needed); see the module's notes on cost."""
    now = now or datetime.now(UTC)
    snap = Snapshot(taken_at=now)
    with engine().connect() as conn:
        queued_total = running_total = 0
        for row in conn.execute(QUEUED_SQL, {"now": now, "cap": cap}).mappings():
            for figures in (
                snap.by_type.setdefault(row["type"], {}),
                snap.by_queue.setdefault(row["queue"], {}),
            ):
                figures["ready"] = figures.get("ready", 0) + row["ready"]
                figures["scheduled"] = figures.get("scheduled", 0) + row["scheduled"]
                if row["oldest_ready"] is not None:
                    age = max(0.0, (now - row["oldest_ready"]).total_seconds())
                    figures["oldest_ready_age"] = max(figures.get("oldest_ready_age", 0.0), age)
            queued_total += row["ready"] + row["scheduled"]
        waiting_total = 0
        for row in conn.execute(WAITING_SQL, {"cap": cap}).mappings():
            snap.by_type.setdefault(row["type"], {})["waiting"] = row["waiting"]
            waiting_total += row["waiting"]
        for row in conn.execute(RUNNING_BY_QUEUE_SQL, {"cap": cap}).mappings():
            snap.by_queue.setdefault(row["queue"], {})["running"] = row["running"]
        for name in conn.execute(PAUSED_SQL).scalars():
            snap.by_queue.setdefault(name, {})["paused"] = 1
        for row in conn.execute(RUNNING_SQL, {"now": now, "cap": cap}).mappings():
            figures = snap.by_type.setdefault(row["type"], {})
            figures.update(running=row["running"], overdue=row["overdue"])
            running_total += row["running"]
        snap.capped = {
            "queued": queued_total >= cap,
            "running": running_total >= cap,
            "waiting": waiting_total >= cap,
        }
        snap.finished, snap.finished_counted_at = finished_totals(conn, now, policy)
        snap.schedules = [
            dict(row) for row in conn.execute(SCHEDULE_FIGURES, {"limit": SCHEDULES_MAX}).mappings()
        ]
    snap.workers_alive, _types = workers.live_job_types(now)
    return snap


def finished_totals(
    conn: Connection, now: datetime, policy: StatsPolicy
) -> tuple[dict[str, int], datetime | None]:
    """The succeeded, failed and cancelled totals a scrape may publish, and when they were counted.

    By the stats' policy (``stats.finished_totals``): below ``policy.exact_below_rows`` counted
    now; above, the cached ``jobs_finished_counts``, recounted in the background once older than
    ``policy.refresh_seconds`` and not returned (an empty dict) once older than twice that: such
    a scrape leaves those series out instead of publishing what was counted before an idle
    spell. The time is returned either way, so the age gauge says how old the cached totals are.
    """
    totals = stats_finished_totals(conn, now, policy)
    if totals is None:
        return {}, None
    if totals.counted_at is None:
        return totals.as_dict(), now
    if (now - totals.counted_at).total_seconds() > 2 * policy.refresh_seconds:
        return {}, totals.counted_at
    return totals.as_dict(), totals.counted_at
