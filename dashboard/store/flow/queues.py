"""Named queues: their settings (pause, concurrency limit, rate limit); their figures are in
``reads/queues.py``.

The settings are the rows the claim reads at statement time (claim.sql): ``jobs_queue`` (paused,
the limits), ``jobs_queue_slot`` (one row per unit of a concurrency limit) and
``jobs_queue_rate`` (the rate limit's ring). They hold for every worker on every host and
survive restarts. Every change is written with its ``jobs_audit`` row (who, when, what) in
one statement (pause, resume) or one transaction (limits), and takes any valid name, one with
no jobs yet included (its row is created). The doors call :func:`pause`, :func:`resume` and
:func:`set_limits` (and read the figures from ``reads/queues.py``); they never write these rows
themselves.

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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ...config.rules import CONCURRENCY_LIMIT_MAX, RATE_COUNT_MAX, RATE_PERIOD_MAX_SECONDS, queue_problem
from ...extensions import engine
from ..connection import autocommit, fetch_rows
from ..sql import query
from ..values import aware, utcnow

PAUSE, RESUME = query("pause_queue"), query("resume_queue")
ENSURE, LOCK, LOCK_SLOTS = query("ensure_queue"), query("lock_queue"), query("lock_slots")
DROP_SLOTS, ADD_SLOTS, SEAT_RUNNING = query("drop_slots"), query("add_slots"), query("seat_running")
RESIZE_RING, WRITE_LIMITS, FREE_STALE = query("resize_ring"), query("write_limits"), query("free_stale_slots")
RATE_WINDOW = query("rate_window")

UNSET: Any = object()  # a limit not given: left as it is


@dataclass(frozen=True)
class RateLimit:
    count: int
    period_seconds: float


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
    with engine().begin() as conn:
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


@dataclass(frozen=True)
class Window:
    """When a rate window opens for a worker (:func:`rate_window`)."""

    # Seconds (the database's clock) until the earliest full ring frees an entry; None: none is full.
    opens_in: float | None
    all_closed: bool  # every queue served waits for a window: nothing is claimable before then


def rate_window(
    queues: Sequence[str] | None, *, now: datetime | None = None, conn: Connection | None = None
) -> Window | None:
    """The next opening of a full rate window among ``queues`` (``None``: every queue), or
    ``None`` when no served queue has a rate limit. ``now``: the claim's time (unset: the
    database's clock). A worker that claimed nothing waits for it instead of a poll interval
    (``runtime.threads.ThreadRuntime.idle_seconds``)."""
    params = {
        "queues": None if queues is None else list(queues),
        "now": None if now is None else aware(now, "now"),
    }
    with autocommit(conn) as conn:
        row = fetch_rows(conn, RATE_WINDOW, params)[0]
    if not row["rated"]:
        return None
    opens = row["opens_at"]
    opens_in = None if opens is None else max(0.0, (opens - row["now"]).total_seconds())
    return Window(opens_in, bool(row["all_closed"]))
