"""Lease recovery: the cleanup tick, and the rescuer thread that runs it on schedule.

Each one-job thread also runs the tick between jobs, but a thread inside a long handler ticks
nothing; if every thread of every worker is busy, expired leases would wait for a free thread.
One rescuer thread per process runs the tick every ``cleanup_interval_seconds`` regardless, so
a dead worker's job is recovered within about lease + cleanup interval. ``SKIP LOCKED`` keeps
it and the threads from stepping on each other. After each tick it also analyzes a queue
table that outgrew its planner statistics tenfold (``store/planner_stats.py``: a burst into a
nearly empty table would otherwise run on plans made for a page or two).
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import exc as sa_exc

from ..ops import worker_metrics
from ..store import planner_stats, service
from ..store.records import CleanupResult
from .threads import ThreadRuntime

log = logging.getLogger(__name__)


def recover_expired(runtime: ThreadRuntime) -> CleanupResult:
    """Recover up to ``cleanup_batch_size`` expired leases (any worker's) on ``runtime``'s
    connection: requeued with a backoff, or failed when out of attempts."""
    settings = runtime.settings
    result = service.cleanup_expired_jobs(
        runtime.worker_id,
        batch_size=settings.cleanup_batch_size,
        backoff_base_seconds=settings.backoff_base_seconds,
        backoff_max_seconds=settings.backoff_max_seconds,
        conn=runtime.connection,
    )
    worker_metrics.recovered(result)  # issue 19
    if result.count:
        log.info(
            "%s: cleanup recovered %d expired lease(s): %d requeued, %d failed",
            runtime.worker_id,
            result.count,
            len(result.requeued),
            len(result.failed),
        )
    else:
        log.debug("%s: cleanup found no expired lease", runtime.worker_id)
    return result


def refresh_statistics(runtime: ThreadRuntime) -> list[dict[str, object]]:
    """Analyze the queue tables that outgrew their statistics (usually none); returns them. A
    database error is logged and left to the next tick (autovacuum analyzes them too)."""
    try:
        grown = planner_stats.analyze_grown(conn=runtime.connection)
    except sa_exc.SQLAlchemyError as error:
        log.warning("%s: could not check the planner statistics: %s", runtime.worker_id, type(error).__name__)
        return []
    for row in grown:
        log.info(
            "%s: %s grew from %s to %s pages since its planner statistics: ANALYZE (SKIP_LOCKED) sent",
            runtime.worker_id,
            row["name"],
            row["analyzed_pages"],
            row["pages"],
        )
    return grown


class Rescuer:
    """The process's lease-recovery thread."""

    def __init__(self, runtime: ThreadRuntime, stopping: threading.Event) -> None:
        self.runtime = runtime  # its own worker id, connection and outage backoff
        self.stopping = stopping

    def run(self) -> None:
        runtime = self.runtime
        with runtime.holding_connection():
            while not self.stopping.is_set():
                try:
                    recover_expired(runtime)
                    runtime.backoff.reset()
                except Exception as error:
                    runtime.recover(error)
                    continue
                refresh_statistics(runtime)
                self.stopping.wait(runtime.settings.cleanup_interval_seconds)
