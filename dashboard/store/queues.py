"""Named queues: their settings (pause, concurrency limit, rate limit) and their figures.

The settings are the rows the claim reads at statement time (claim.sql): ``jobs_queue`` (paused,
the limits), ``jobs_queue_slot`` (one row per unit of a concurrency limit) and
``jobs_queue_rate`` (the rate limit's ring). They hold for every worker on every host and
survive restarts. Every change is written with its ``jobs_audit`` row (who, when, what) in
one statement (pause, resume) or one transaction (limits), and takes any valid name, one with
no jobs yet included (its row is created). The doors call :func:`pause`, :func:`resume`,
:func:`set_limits` and read :func:`list_queues` / :func:`get_queue`; they never write these
rows themselves.

Changing a concurrency limit (:func:`set_limits`): raising it adds free slots; lowering it
deletes free slots first, then held ones (an attempt whose slot is gone frees nothing when it
ends, so the queue settles at the new limit as they finish); from none to N it creates N slots
and gives each attempt of the queue running at that moment one of them. A claim already in
flight when a limit is first set read no limit (its snapshot is older) and may still claim
without a slot: a transient of at most the claims in flight at that instant, over when those
attempts end. A settle racing the first slots may leave its slot held; :func:`free_stale_slots`
(the rescuer, each pass) frees it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from ..extensions import db
from ..limits import (
    CHART_EVENTS_MAX,
    CONCURRENCY_LIMIT_MAX,
    DEFAULT_QUEUE,
    LIVE_COUNT_CAP,
    RATE_COUNT_MAX,
    RATE_PERIOD_MAX_SECONDS,
    queue_problem,
)
from .connection import autocommit, fetch_rows
from .read_timeout import reading
from .sql import query
from .values import aware, utcnow

PAUSE, RESUME = query("pause_queue"), query("resume_queue")
ENSURE, LOCK, LOCK_SLOTS = query("ensure_queue"), query("lock_queue"), query("lock_slots")
DROP_SLOTS, ADD_SLOTS, SEAT_RUNNING = query("drop_slots"), query("add_slots"), query("seat_running")
RESIZE_RING, WRITE_LIMITS, FREE_STALE = query("resize_ring"), query("write_limits"), query("free_stale_slots")

UNSET: Any = object()  # a limit not given: left as it is


@dataclass(frozen=True)
class RateLimit:
    count: int
    period_seconds: float


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
        }


def check_name(name: object) -> str:
    """``name`` if it is a valid queue name, else ``ValueError`` naming ``name``."""
    if problem := queue_problem(name):
        raise ValueError(f"name {problem}")
    return name  # type: ignore[return-value]


def check_concurrency_limit(value: object) -> int | None:
    """A concurrency limit (1 to ``CONCURRENCY_LIMIT_MAX``) or ``None``; ``ValueError`` naming it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= CONCURRENCY_LIMIT_MAX:
        raise ValueError(f"concurrency_limit must be null or an integer from 1 to {CONCURRENCY_LIMIT_MAX}")
    return value


def check_rate_limit(value: object) -> RateLimit | None:
    """A rate limit (``RateLimit``, or a mapping ``{count, period_seconds}``) or ``None``."""
    if value is None:
        return None
    if isinstance(value, RateLimit):
        count, period = value.count, value.period_seconds
    elif isinstance(value, dict) and set(value) == {"count", "period_seconds"}:
        count, period = value["count"], value["period_seconds"]
    else:
        raise ValueError("rate_limit must be null or {count, period_seconds}")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= RATE_COUNT_MAX:
        raise ValueError(f"rate_limit.count must be an integer from 1 to {RATE_COUNT_MAX}")
    if (
        isinstance(period, bool)
        or not isinstance(period, int | float)
        or not math.isfinite(period)
        or not 0 < period <= RATE_PERIOD_MAX_SECONDS
    ):
        raise ValueError(
            f"rate_limit.period_seconds must be a number above 0 and at most {RATE_PERIOD_MAX_SECONDS:g}"
        )
    return RateLimit(count, float(period))


def _audit(actor: str, event_data: dict[str, Any] | None) -> dict[str, Any]:
    return {"actor": actor, **(event_data or {})}


def pause(
    name: str, *, actor: str = "", event_data: dict[str, Any] | None = None, now: datetime | None = None
) -> bool:
    """Pause ``name``: no new attempt of it is claimed by any worker from the commit on.
    Running attempts go on and settle; a retry re-enters the paused queue. Returns whether it
    changed (``False``: it was paused already, a no-op, no audit row)."""
    check_name(name)
    now = aware(now or utcnow(), "now")
    params = {"name": name, "now": now, "actor": actor, "event_data": _audit(actor, event_data)}
    with autocommit(None) as conn:
        return bool(fetch_rows(conn, PAUSE, params))


def resume(
    name: str, *, actor: str = "", event_data: dict[str, Any] | None = None, now: datetime | None = None
) -> bool:
    """Resume ``name`` and wake idle workers serving it at once (NOTIFY). Returns whether it
    was paused."""
    check_name(name)
    now = aware(now or utcnow(), "now")
    params = {"name": name, "now": now, "actor": actor, "event_data": _audit(actor, event_data)}
    with autocommit(None) as conn:
        return bool(fetch_rows(conn, RESUME, params))


def set_limits(
    name: str,
    *,
    concurrency_limit: Any = UNSET,
    rate_limit: Any = UNSET,
    actor: str = "",
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> None:
    """Set the queue's concurrency limit and/or rate limit (``None``: no limit; left out: as
    it is), with a ``queue_limits_changed`` audit row, in one transaction. ``ValueError``
    naming the field for a value out of range, with nothing changed. See the module's
    docstring for what a change does to attempts already running."""
    check_name(name)
    concurrency = UNSET if concurrency_limit is UNSET else check_concurrency_limit(concurrency_limit)
    rate = UNSET if rate_limit is UNSET else check_rate_limit(rate_limit)
    now = aware(now or utcnow(), "now")
    with db.engine.begin() as conn:
        conn.execute(ENSURE, {"name": name, "now": now})
        row = conn.execute(LOCK, {"name": name}).mappings().one()
        old_rate = (
            None if row["rate_count"] is None else RateLimit(row["rate_count"], row["rate_period_seconds"])
        )
        new_concurrency = row["concurrency_limit"] if concurrency is UNSET else concurrency
        new_rate = old_rate if rate is UNSET else rate
        if new_concurrency != row["concurrency_limit"]:
            _resize_slots(conn, name, new_concurrency, seat=row["concurrency_limit"] is None)
        if new_rate != old_rate:
            conn.execute(RESIZE_RING, {"name": name, "count": 0 if new_rate is None else new_rate.count})
        change = {
            "queue": name,
            "concurrency_limit": {"from": row["concurrency_limit"], "to": new_concurrency},
            "rate_limit": {"from": _rate_json(old_rate), "to": _rate_json(new_rate)},
        }
        params = {
            "name": name,
            "now": now,
            "actor": actor,
            "concurrency_limit": new_concurrency,
            "rate_count": None if new_rate is None else new_rate.count,
            "rate_period_seconds": None if new_rate is None else new_rate.period_seconds,
            "event_data": _audit(actor, event_data),
            "change": change,
        }
        conn.execute(WRITE_LIMITS, params)
    free_stale_slots()


def _rate_json(rate: RateLimit | None) -> dict[str, Any] | None:
    return None if rate is None else {"count": rate.count, "period_seconds": rate.period_seconds}


def _resize_slots(conn: Connection, name: str, limit: int | None, *, seat: bool) -> None:
    """Give the queue ``limit`` slot rows (none for ``None``); free ones are dropped first."""
    slots = conn.execute(LOCK_SLOTS, {"name": name}).mappings().all()
    want = limit or 0
    if len(slots) > want:
        order = sorted(slots, key=lambda s: (s["job_id"] is not None, -s["n"]))  # free, highest first
        conn.execute(DROP_SLOTS, {"name": name, "ns": [s["n"] for s in order[: len(slots) - want]]})
    elif len(slots) < want:
        conn.execute(ADD_SLOTS, {"name": name, "count": want - len(slots)})
    if seat and want:
        conn.execute(SEAT_RUNNING, {"name": name})


def free_stale_slots(conn: Connection | None = None) -> int:
    """Free the slots whose attempt is no longer running (queues.sql says when that happens);
    returns how many. A statement over at most the sum of the limits' rows."""
    with autocommit(conn) as conn:
        return len(fetch_rows(conn, FREE_STALE, {}))


# Per queue: the overview's split (read_overview.QUEUED_SPLIT_SQL) over one queue's ranges of
# job_queued_queue_idx, each capped; running through job_timeout_idx, capped; the slots held,
# the ring entries taken within the period and the earliest that frees. One statement for
# every queue of :names, in their order.
QUEUE_ROWS_SQL = text(
    """
    SELECT names.name, q.paused, q.paused_at, q.paused_by, q.concurrency_limit, q.rate_count,
           q.rate_period_seconds, q.changed_at, q.changed_by,
      (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
          AND least(attempts, 1) = 0 AND available_at <= :now ORDER BY available_at LIMIT :cap) AS r)
      + (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
          AND least(attempts, 1) = 1 AND available_at <= :now ORDER BY available_at LIMIT :cap) AS r)
          AS ready,
      (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
          AND least(attempts, 1) = 0 AND available_at > :now ORDER BY available_at LIMIT :cap) AS r)
          AS scheduled,
      (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'queued' AND queue = names.name
          AND least(attempts, 1) = 1 AND available_at > :now ORDER BY available_at LIMIT :cap) AS r)
          AS retrying,
      (SELECT count(*) FROM (SELECT 1 FROM jobs_job WHERE status = 'running' AND queue = names.name
          LIMIT :cap) AS r) AS running,
      LEAST(
        (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' AND queue = names.name
            AND least(attempts, 1) = 0 AND available_at <= :now),
        (SELECT min(available_at) FROM jobs_job WHERE status = 'queued' AND queue = names.name
            AND least(attempts, 1) = 1 AND available_at <= :now)) AS oldest_ready_at,
      (SELECT count(*) FROM jobs_queue_slot AS s WHERE s.queue = names.name AND s.job_id IS NOT NULL)
          AS slots_held,
      (SELECT count(*) FROM jobs_queue_rate AS r WHERE r.queue = names.name
          AND r.taken_at > :now - make_interval(secs => q.rate_period_seconds)) AS rate_used,
      (SELECT min(r.taken_at) + make_interval(secs => q.rate_period_seconds) FROM jobs_queue_rate AS r
          WHERE r.queue = names.name AND r.taken_at > :now - make_interval(secs => q.rate_period_seconds))
          AS rate_free_at
    FROM unnest(CAST(:names AS text[])) WITH ORDINALITY AS names(name, n)
    LEFT JOIN jobs_queue AS q ON q.name = names.name
    ORDER BY names.n
    """
)
# Every queue with a row, and `default` if it has jobs but no row (a table emptied by hand):
# the queues table is small, one row per queue ever named.
NAMES_SQL = text(
    "SELECT name FROM jobs_queue UNION SELECT CAST(:default AS varchar) WHERE EXISTS "
    "(SELECT 1 FROM jobs_job WHERE queue = CAST(:default AS varchar) AND status IN ('queued', 'running')) "
    "ORDER BY 1"
)
QUEUES_SHOWN = 500  # queues a list shows at most (the table holds one row per queue ever named)


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
    )


def list_queues(*, now: datetime | None = None, cap: int = LIVE_COUNT_CAP) -> list[QueueInfo]:
    """Every queue that has jobs or settings, by name (at most :data:`QUEUES_SHOWN`)."""
    now = aware(now or utcnow(), "now")
    with reading() as conn:
        names = list(conn.execute(NAMES_SQL, {"default": DEFAULT_QUEUE}).scalars())[:QUEUES_SHOWN]
        rows = conn.execute(QUEUE_ROWS_SQL, {"names": names, "now": now, "cap": cap}).mappings().all()
    return [_info(row, now, cap) for row in rows]


def get_queue(name: str, *, now: datetime | None = None, cap: int = LIVE_COUNT_CAP) -> QueueInfo | None:
    """One queue, or ``None`` for a name that has neither jobs nor settings."""
    check_name(name)
    now = aware(now or utcnow(), "now")
    with reading() as conn:
        rows = conn.execute(QUEUE_ROWS_SQL, {"names": [name], "now": now, "cap": cap}).mappings().all()
        row = rows[0]
        if row["paused"] is None:  # no row: a queue only if it has jobs
            found = conn.execute(text("SELECT 1 FROM jobs_job WHERE queue = :name LIMIT 1"), {"name": name})
            if found.first() is None:
                return None
    return _info(row, now, cap)


# Claims per queue in the last hour, from at most the newest CHART_EVENTS_MAX events of it
# (jobs_jobevent_created_at_idx, as the overview's charts read them): each `claimed` event's
# data names its queue. Past the cap the figure is a lower bound (``sampled``).
CLAIMS_HOUR_SQL = text(
    """
    SELECT COALESCE(data ->> 'queue', :default) AS queue, count(*) AS claims, max(total) AS read
    FROM (SELECT type, data, count(*) OVER () AS total FROM jobs_jobevent
          WHERE created_at > :since AND created_at <= :now
          ORDER BY created_at DESC LIMIT :cap) AS e
    WHERE type = 'claimed'
    GROUP BY 1
    """
)


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


# The queues whose settings can hold a job back: paused, or with a limit.
SET_SQL = text(
    "SELECT name FROM jobs_queue WHERE paused OR concurrency_limit IS NOT NULL OR rate_count IS NOT NULL "
    "ORDER BY name LIMIT :shown"
)


def held_back(*, now: datetime | None = None) -> list[QueueInfo]:
    """The queues that hold ready jobs back now: paused, at their concurrency limit, or with a
    full rate window, and with a ready job (the overview's notice)."""
    now = aware(now or utcnow(), "now")
    with reading() as conn:
        names = list(conn.execute(SET_SQL, {"shown": QUEUES_SHOWN}).scalars())
        if not names:
            return []
        rows = conn.execute(QUEUE_ROWS_SQL, {"names": names, "now": now, "cap": LIVE_COUNT_CAP}).mappings()
        found = [_info(row, now, LIVE_COUNT_CAP) for row in rows]
    return [q for q in found if q.ready and (q.paused or q.full or q.rate_limited)]
