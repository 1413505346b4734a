"""Retention: delete finished jobs (and their events) once they are old enough.

``JOB_RETENTION_SUCCEEDED`` (default 7 days) and ``JOB_RETENTION_FAILED`` (default 30 days)
say how long after ``finished_at`` a job is kept; 0 keeps it forever. Queued and running jobs
are never touched, whatever their age.

How it stays out of the workers' way:

- **small batches**: each statement deletes at most ``batch_size`` (1,000) jobs, the oldest
  first, found through the partial index ``job_finished_idx`` (status, finished_at); their
  events go in the same statement (a data-modifying CTE; the jobs' delete trigger, which takes
  a deleted job's events along, then finds nothing left), so a batch is one short transaction;
- **pauses**: after each batch the pass sleeps at least as long as the batch took (and at
  least ``pause_seconds``), so it never holds the table more than half the time;
- **one pruner at a time**: each batch's transaction first takes
  ``pg_try_advisory_xact_lock(LOCK_KEY)``; if another process holds it, this pass stops at
  once (a try-lock: nobody ever waits on it). A transaction-level lock works through a
  transaction pooler (PgBouncer), where a session lock would stay behind on a server
  connection;
- ``FOR UPDATE SKIP LOCKED``: a finished job an operator is retrying right now is skipped,
  and one that became queued meanwhile no longer matches.

The succeeded/failed totals (``jobs_finished_counts``, ``/api/jobs/stats/``) count the jobs
still kept: pruned jobs leave the totals. After a pass that deleted something the view is
recounted, so the totals are right once the pass ends. Lifetime counts belong to the workers'
Prometheus counters.

This module is the SQL and one pass (:func:`prune`, used by ``flask prune`` and the worker's
retention thread); the thread that runs a pass on schedule is ``runtime/pruner.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ...extensions import engine
from ..reads.stats_refresh import refresh_finished_counts
from ..sql import query

LOCK_KEY = 0x6A6F6272  # "jobr": one pruner at a time across every process
BATCH_SIZE = 1_000
PAUSE_SECONDS = 0.05
STATUSES = ("succeeded", "failed")

TRY_LOCK, DELETE_BATCH, COUNT_EXPIRED = query("prune_try_lock"), query("prune_batch"), query("prune_count")


class Stopping(Protocol):
    """What :func:`prune` needs of a stop signal (a ``threading.Event`` has both)."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class _NeverStops:
    """A pass run on demand (``flask prune``): pauses sleep, nothing stops it early."""

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float | None = None) -> bool:
        time.sleep(timeout or 0)
        return False


@dataclass
class Removed:
    """What one pass removed (or, in a dry run, would remove), per status."""

    cutoffs: dict[str, datetime] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    busy: bool = False  # another process was pruning: this pass stopped early

    @property
    def total_jobs(self) -> int:
        return sum(self.jobs.values())

    def describe(self, *, dry_run: bool = False) -> str:
        verb = "would remove" if dry_run else "removed"
        if not self.cutoffs:
            return "retention is off for succeeded and failed jobs (0 keeps forever); nothing to do"
        parts = [
            f"{verb} {self.jobs.get(s, 0):,} {s} job(s) and {self.events.get(s, 0):,} event(s) "
            f"finished before {cutoff.isoformat(timespec='seconds')}"
            for s, cutoff in self.cutoffs.items()
        ]
        if self.busy:
            parts.append("stopped early: another process is pruning")
        return "; ".join(parts)


def cutoffs(retention_days: dict[str, float], now: datetime | None = None) -> dict[str, datetime]:
    """The finish time before which each status's jobs expire; 0 days (keep forever) is left out."""
    now = now or datetime.now(UTC)
    return {s: now - timedelta(days=d) for s, d in retention_days.items() if s in STATUSES and d > 0}


def count_expired(limits: dict[str, datetime]) -> Removed:
    """A dry run: how many jobs and events a pass would remove now (exact; reads the index)."""
    found = Removed(cutoffs=dict(limits))
    with engine().connect() as conn:
        for status, cutoff in limits.items():
            row = conn.execute(COUNT_EXPIRED, {"status": status, "cutoff": cutoff}).mappings().one()
            found.jobs[status], found.events[status] = row["jobs"], row["events"]
    return found


def prune(
    limits: dict[str, datetime],
    *,
    batch_size: int = BATCH_SIZE,
    pause_seconds: float = PAUSE_SECONDS,
    stopping: Stopping | None = None,
    on_batch: Callable[[str, int, int], None] | None = None,
) -> Removed:
    """Delete expired jobs in batches until none is left (app context needed).

    Stops early when ``stopping`` is set or another process holds the lock (``busy``).
    """
    removed = Removed(cutoffs=dict(limits))
    stopping = stopping or _NeverStops()
    for status, cutoff in limits.items():
        removed.jobs.setdefault(status, 0)
        removed.events.setdefault(status, 0)
        while not stopping.is_set():
            started = time.monotonic()
            with engine().begin() as conn:
                if not conn.execute(TRY_LOCK, {"key": LOCK_KEY}).scalar():
                    removed.busy = True
                    return removed
                params = {"status": status, "cutoff": cutoff, "batch": batch_size}
                row = conn.execute(DELETE_BATCH, params).mappings().one()
            removed.batches += 1
            removed.jobs[status] += row["jobs"]
            removed.events[status] += row["events"]
            if on_batch is not None:
                on_batch(status, row["jobs"], row["events"])
            if row["jobs"] < batch_size:
                break
            stopping.wait(max(pause_seconds, time.monotonic() - started))
    if removed.total_jobs:
        refresh_finished_counts()  # the totals lose the pruned jobs now, not later
    return removed
