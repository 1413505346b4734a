"""Rescue: expired leases given back to the queue (or failed), and the rescuer that does it
on schedule.

:func:`rescue` is one pass of the store's ``rescue_expired_jobs``: each expired lease requeued
with a backoff (``timeout_requeued``) or failed when out of attempts. Each one-job thread also
runs a pass between jobs (its rescue tick), but a thread inside a long handler ticks nothing;
if every thread of every worker is busy, expired leases would wait for a free thread. So one
:class:`Rescuer` thread per process (``thread-0``) runs a pass every
``cleanup_interval_seconds`` regardless, and a dead worker's job is rescued within about
lease + cleanup interval. ``SKIP LOCKED`` keeps it and the threads from stepping on each
other. After each pass it also analyzes a queue table that outgrew its planner statistics
tenfold (``store/planner_stats.py``: a burst into a nearly empty table would otherwise run on
plans made for a page or two), and frees the concurrency slots of attempts already over that
a settle could not see (``store/flow/queues.py``).
"""

from __future__ import annotations

import logging

from sqlalchemy import exc as sa_exc

from ..ops import worker_metrics
from ..store import lifecycle, planner_stats
from ..store.flow import queues
from ..store.records import RescueResult
from .threads import PeriodicService, ThreadRuntime

log = logging.getLogger(__name__)


def rescue(runtime: ThreadRuntime) -> RescueResult:
    """Rescue up to ``cleanup_batch_size`` expired leases (any worker's) on ``runtime``'s
    connection: requeued with a backoff, or failed when out of attempts."""
    settings = runtime.settings
    result = lifecycle.rescue_expired_jobs(
        runtime.worker_id,
        batch_size=settings.cleanup_batch_size,
        backoff_base_seconds=settings.backoff_base_seconds,
        backoff_max_seconds=settings.backoff_max_seconds,
        conn=runtime.connection,
    )
    worker_metrics.rescued(result)
    if result.count:
        log.info(
            "%s: rescued %d expired lease(s): %d requeued, %d failed",
            runtime.worker_id,
            result.count,
            len(result.requeued),
            len(result.failed),
        )
    else:
        log.debug("%s: no expired lease to rescue", runtime.worker_id)
    return result


def refresh_statistics(runtime: ThreadRuntime) -> list[dict[str, object]]:
    """Analyze the queue tables that outgrew their statistics (usually none); returns them. A
    database error is logged and left to the next pass (autovacuum analyzes them too)."""
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


def free_stale_slots(runtime: ThreadRuntime) -> int:
    """Free the concurrency slots of attempts that are over but whose settle could not see
    their slot (``store/flow/queues.py``); usually none. A database error is left to the next pass."""
    try:
        freed = queues.free_stale_slots(conn=runtime.connection)
    except sa_exc.SQLAlchemyError as error:
        log.warning("%s: could not check the queue slots: %s", runtime.worker_id, type(error).__name__)
        return 0
    if freed:
        log.info("%s: freed %d concurrency slot(s) of attempts already over", runtime.worker_id, freed)
    return freed


class Rescuer(PeriodicService):
    """The process's rescue thread (a worker service): a pass every cleanup interval.

    It ends with the claims: ``runtime.stopping`` (the worker's stop signal) ends its loop, so
    a stopping worker rescues no more, and :meth:`stop` then only waits for the thread.
    """

    name = "rescuer"
    thread_name = "thread-0"

    def step(self) -> float:
        """One pass: rescue expired leases (a failure here is retried after the backoff), then
        refresh the small-table statistics and free stale limit slots."""
        runtime = self.runtime
        rescue(runtime)
        refresh_statistics(runtime)
        free_stale_slots(runtime)
        return runtime.settings.cleanup_interval_seconds
