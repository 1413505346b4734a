"""Named queues' figures: what ``/queues/``, ``/api/queues/``, ``flask queues``, the overview's
notice and "why isn't this job running" read (the settings are ``queues.py``'s).

Every count is bounded: per queue, the overview's split over one queue's ranges of
``job_queued_queue_idx`` (queue, least(attempts, 1), available_at) WHERE status = 'queued', each
capped; running through ``job_timeout_idx``, capped; the queue's slot and ring rows (at most a
limit's worth); at most :data:`QUEUES_SHOWN` queues.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ...config.rules import CHART_EVENTS_MAX, DEFAULT_QUEUE, LIVE_COUNT_CAP, QUEUE_COUNT_CAP
from ..flow.queues import RateLimit, check_name
from ..reading import in_index_order, reading
from ..sql import query
from ..values import aware, utcnow


@dataclass(frozen=True)
class QueueInfo:
    """One queue as the API, the page and the CLI show it. Counts are exact up to ``cap``."""

    name: str
    paused: bool
    concurrency_limit: int | None
    rate_limit: RateLimit | None
    ready: int
    scheduled: int
    retrying: int
    running: int
    oldest_ready_wait_seconds: float | None
    paused_at: datetime | None = None
    paused_by: str = ""
    changed_at: datetime | None = None
    changed_by: str = ""
    slots_held: int = 0  # running attempts holding a slot (concurrency limit)
    rate_used: int = 0  # claims in the current window (rate limit)
    rate_free_at: datetime | None = None  # when the next ring entry frees, if the window is full
    cap: int = LIVE_COUNT_CAP
    waiting: int = 0  # queued for parents (depends_on): not due until released

    @property
    def full(self) -> bool:
        """At its concurrency limit: no new attempt starts until one ends."""
        return self.concurrency_limit is not None and self.slots_held >= self.concurrency_limit

    @property
    def rate_limited(self) -> bool:
        """Its rate window is full: the next claim waits for ``rate_free_at``."""
        return self.rate_limit is not None and self.rate_used >= self.rate_limit.count

    def as_json(self) -> dict[str, Any]:
        """The contract's queue JSON."""
        rate = self.rate_limit
        return {
            "name": self.name,
            "paused": self.paused,
            "concurrency_limit": self.concurrency_limit,
            "rate_limit": None
            if rate is None
            else {"count": rate.count, "period_seconds": rate.period_seconds},
            "ready": self.ready,
            "scheduled": self.scheduled,
            "retrying": self.retrying,
            "running": self.running,
            "oldest_ready_wait_seconds": self.oldest_ready_wait_seconds,
            "waiting": self.waiting,
        }


QUEUE_ROWS_SQL = query("queue_rows")
NAMES_SQL = query("queue_names")
HAS_JOBS_SQL = query("queue_has_jobs")
CLAIMS_HOUR_SQL = query("claims_last_hour")
SET_SQL = query("queues_holding_back")
QUEUES_SHOWN = 500  # queues a list shows at most (the table holds one row per queue ever named)


@dataclass(frozen=True)
class QueueBoard:
    """The queues a list shows (at most :data:`QUEUES_SHOWN`, every paused one among them
    before any other, by name) and how many queues there are in all."""

    queues: list[QueueInfo]
    total: int

    @property
    def truncated(self) -> bool:
        """More queues exist than are shown."""
        return self.total > len(self.queues)


def _info(row: Any, now: datetime, cap: int) -> QueueInfo:
    rate = None if row["rate_count"] is None else RateLimit(row["rate_count"], row["rate_period_seconds"])
    oldest = row["oldest_ready_at"]
    full_rate = rate is not None and row["rate_used"] >= rate.count
    return QueueInfo(
        name=row["name"],
        paused=bool(row["paused"]),
        concurrency_limit=row["concurrency_limit"],
        rate_limit=rate,
        ready=min(row["ready"], cap + 1),
        scheduled=row["scheduled"],
        retrying=row["retrying"],
        running=row["running"],
        oldest_ready_wait_seconds=None if oldest is None else max(0.0, (now - oldest).total_seconds()),
        paused_at=row["paused_at"],
        paused_by=row["paused_by"] or "",
        changed_at=row["changed_at"],
        changed_by=row["changed_by"] or "",
        slots_held=row["slots_held"],
        rate_used=row["rate_used"],
        rate_free_at=row["rate_free_at"] if full_rate else None,
        cap=cap,
        waiting=min(row["waiting"], cap + 1),
    )


def queue_board(*, now: datetime | None = None, cap: int = QUEUE_COUNT_CAP) -> QueueBoard:
    """Every queue that has jobs or settings, by name, at most :data:`QUEUES_SHOWN` of them
    (past it, the paused ones first, then the rest by name), with how many there are; each
    count exact up to ``cap`` (one queue's own read, :func:`get_queue`, up to 10,000)."""
    now = aware(now or utcnow(), "now")
    with reading() as conn:
        found = conn.execute(NAMES_SQL, {"default": DEFAULT_QUEUE, "shown": QUEUES_SHOWN}).all()
        names = [row.name for row in found]
        with in_index_order(conn):
            rows = conn.execute(QUEUE_ROWS_SQL, {"names": names, "now": now, "cap": cap + 1}).mappings().all()
    return QueueBoard([_info(row, now, cap) for row in rows], found[0].total if found else 0)


def list_queues(*, now: datetime | None = None, cap: int = QUEUE_COUNT_CAP) -> list[QueueInfo]:
    """The queues of :func:`queue_board`, without the total."""
    return queue_board(now=now, cap=cap).queues


def get_queue(name: str, *, now: datetime | None = None, cap: int = LIVE_COUNT_CAP) -> QueueInfo | None:
    """One queue, or ``None`` for a name that has neither jobs nor settings."""
    check_name(name)
    now = aware(now or utcnow(), "now")
    with reading() as conn:
        with in_index_order(conn):
            row = conn.execute(QUEUE_ROWS_SQL, {"names": [name], "now": now, "cap": cap + 1}).mappings().one()
        if row["paused"] is None:  # no row: a queue only if it has jobs
            found = conn.execute(HAS_JOBS_SQL, {"name": name})
            if found.first() is None:
                return None
    return _info(row, now, cap)


@dataclass(frozen=True)
class Throughput:
    claims: dict[str, int]
    sampled: bool  # the hour held more events than were read: the figures are lower bounds


def claims_last_hour(*, now: datetime | None = None) -> Throughput:
    """Claims per queue over the last hour (attempts started), bounded as the charts are."""
    now = aware(now or utcnow(), "now")
    params = {
        "since": now - timedelta(hours=1),
        "now": now,
        "cap": CHART_EVENTS_MAX,
        "default": DEFAULT_QUEUE,
    }
    with reading() as conn:
        rows = conn.execute(CLAIMS_HOUR_SQL, params).mappings().all()
    sampled = any(row["read"] >= CHART_EVENTS_MAX for row in rows)
    return Throughput({row["queue"]: row["claims"] for row in rows}, sampled)


def held_back(*, now: datetime | None = None) -> list[QueueInfo]:
    """The queues that hold ready jobs back now: paused, at their concurrency limit, or with a
    full rate window, and with a ready job (the overview's notice)."""
    now = aware(now or utcnow(), "now")
    with reading() as conn:
        names = list(conn.execute(SET_SQL, {"shown": QUEUES_SHOWN}).scalars())
        if not names:
            return []
        with in_index_order(conn):
            rows = conn.execute(
                QUEUE_ROWS_SQL, {"names": names, "now": now, "cap": QUEUE_COUNT_CAP + 1}
            ).mappings()
            found = [_info(row, now, QUEUE_COUNT_CAP) for row in rows]
    return [q for q in found if q.ready and (q.paused or q.full or q.rate_limited)]
