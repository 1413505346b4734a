"""Worker processes and their heartbeats: the ``jobs_worker`` table.

Each ``flask worker`` process upserts its row every ``JOB_WORKER_HEARTBEAT_SECONDS``
(:func:`beat`, from ``runtime/heartbeat.py``) and marks it stopped on a clean exit
(:func:`mark_stopped`). The row says which queues it claims from (``queues``; ``NULL``: every
queue) and what each of its threads is doing (``activity``: idle, or
the job, attempt, start and lease of the attempt its handler runs), as the process itself
sees it: a thread stuck in a handler past its lease is busy, whatever the rescue did with
its job meanwhile. States (:func:`state_of`):

- *alive*: the last heartbeat is younger than :data:`STALE_AFTER_BEATS` of its own intervals;
- *stale*: older (killed, frozen, or cut off from the database): it may come back;
- *gone*: silent for :data:`GONE_AFTER` (or ten times the stale window, if longer): it is
  not coming back; an operator may remove its row (:func:`remove`, recorded in ``jobs_audit``);
- *stopped*: it said so on a clean exit.

The jobs a process holds are the running jobs whose ``locked_by`` starts with ``host:pid:``
(``runtime/threads.make_worker_id``); the running set is small and read through
``job_timeout_idx`` (its predicate is ``status = 'running'``). Rows stopped or silent for
:data:`FORGET_AFTER` are deleted by the living processes' heartbeats. This table holds no job
state: the queue never reads it to decide anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..extensions import engine
from .reading import reading
from .sql import query
from .values import aware, pg_safe, utcnow

STALE_AFTER_BEATS = 3
GONE_AFTER = timedelta(minutes=10)
GONE_AFTER_STALE_WINDOWS = 10  # a slow heartbeat: gone only after ten of its stale windows
FORGET_AFTER = timedelta(hours=24)
HELD_SHOWN = 20  # jobs listed per process
STATE_ORDER = {"alive": 0, "stale": 1, "gone": 2, "stopped": 3}

BEAT = query("worker_beat")
FORGET = query("worker_forget")
STOP = query("worker_stop")
# Only a row that is gone or stopped, with its audit row in the same statement.
REMOVE = query("worker_remove")


@dataclass(frozen=True)
class Identity:
    id: str
    host: str
    pid: int
    started_at: datetime
    mode: str
    threads: int
    version: str
    interval_seconds: float
    job_types: tuple[str, ...]
    queues: tuple[str, ...] | None = None  # the queues it claims from; None: every queue

    @property
    def prefix(self) -> str:
        """What the ``locked_by`` of this process's threads starts with."""
        return f"{self.host}:{self.pid}:"


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def beat(me: Identity, *, jobs_done: int, now: datetime, activity: dict[str, Any] | None = None) -> None:
    """Upsert this process's row and forget old rows.

    ``activity``: what each thread runs (``{"threads": [{"thread", "job_id", "type",
    "attempt", "since", "lease_until"}, ...], "cleanup_interval_seconds": ...}``, an idle
    thread with its name only); busy is then the threads running an attempt. Without it, busy
    is counted from the jobs the process holds (at most its threads).
    """
    busy = None
    if activity is not None:
        busy = sum(1 for thread in activity.get("threads", []) if thread.get("job_id"))
    params = {
        "id": me.id,
        "host": me.host,
        "pid": me.pid,
        "started_at": me.started_at,
        "mode": me.mode,
        "threads": me.threads,
        "prefix": _like(me.prefix),
        "busy": busy,
        "jobs_done": jobs_done,
        "now": now,
        "version": me.version,
        "interval": me.interval_seconds,
        "job_types": list(me.job_types),
        "activity": pg_safe(activity) if activity is not None else None,
        "queues": None if me.queues is None else list(me.queues),
    }
    with engine().begin() as conn:
        conn.execute(BEAT, params)
        conn.execute(FORGET, {"before": now - FORGET_AFTER})


def mark_stopped(me: Identity, *, jobs_done: int, now: datetime) -> None:
    with engine().begin() as conn:
        conn.execute(STOP, {"id": me.id, "now": now, "jobs_done": jobs_done})


def remove(worker_id: str, *, event_data: dict[str, Any], now: datetime | None = None) -> bool:
    """Delete a gone or stopped process's row, writing who did it to ``jobs_audit``; False
    (nothing changed) for an unknown row or one that is alive or only stale. ``now``: the
    judgement's time (default: the system's clock)."""
    params = {
        "id": worker_id,
        "now": aware(now or utcnow(), "now"),
        "gone_seconds": GONE_AFTER.total_seconds(),
        "stale_beats": STALE_AFTER_BEATS,
        "gone_windows": GONE_AFTER_STALE_WINDOWS,
        "event_data": pg_safe(event_data),
    }
    with engine().begin() as conn:
        return conn.execute(REMOVE, params).first() is not None


@dataclass(frozen=True)
class HeldJob:
    id: str
    type: str
    locked_by: str
    locked_until: datetime


@dataclass(frozen=True)
class ThreadView:
    """One thread of a process, as its last heartbeat reported it."""

    thread: str  # thread-N
    job_id: str | None = None
    type: str | None = None
    attempt: int | None = None
    since: datetime | None = None
    lease_until: datetime | None = None
    past_lease: bool = False  # running an attempt whose lease ended (lost, still in its handler)

    @property
    def busy(self) -> bool:
        return self.job_id is not None


@dataclass(frozen=True)
class Supervised:
    """A process that a supervisor started (``flask worker --processes N``), as its heartbeat
    said: its index (``p0`` .. in the logs), how many there are, the supervisor's pid."""

    index: int
    processes: int
    supervisor_pid: int


@dataclass(frozen=True)
class WorkerView:
    id: str
    host: str
    pid: int
    started_at: datetime
    mode: str
    threads: int
    busy: int
    jobs_done: int
    last_seen: datetime
    stopped_at: datetime | None
    version: str
    interval_seconds: float
    job_types: list[str]
    state: str  # alive | stale | gone | stopped
    queues: list[str] | None = None  # the queues it claims from; None: every queue
    held: list[HeldJob] = field(default_factory=list)
    held_count: int = 0
    thread_views: list[ThreadView] = field(default_factory=list)
    cleanup_interval_seconds: float | None = None  # its rescuer's, when it reported it
    supervised: Supervised | None = None  # one of a supervisor's processes

    @property
    def prefix(self) -> str:
        return f"{self.host}:{self.pid}:"

    @property
    def stuck(self) -> list[ThreadView]:
        """Threads in a handler past its attempt's lease."""
        return [t for t in self.thread_views if t.past_lease]

    @property
    def removable(self) -> bool:
        return self.state in ("gone", "stopped")


@dataclass(frozen=True)
class WorkerBoard:
    workers: list[WorkerView]
    orphaned: list[HeldJob]  # running jobs held by a process that is not alive (or unknown)
    orphaned_count: int

    @property
    def alive(self) -> list[WorkerView]:
        return [w for w in self.workers if w.state == "alive"]

    @property
    def stuck_threads(self) -> int:
        """Threads of live processes stuck in a handler past their attempt's lease."""
        return sum(len(w.stuck) for w in self.alive)

    def owner(self, locked_by: str | None) -> WorkerView | None:
        """The newest row of the process a ``locked_by`` names (a pid can come back)."""
        if not locked_by:
            return None
        prefix = ":".join(locked_by.split(":")[:2]) + ":"
        rows = [w for w in self.workers if w.prefix == prefix]
        return max(rows, key=lambda w: w.started_at) if rows else None


def state_of(last_seen: datetime, stopped_at: datetime | None, interval: float, now: datetime) -> str:
    if stopped_at is not None:
        return "stopped"
    stale_window = timedelta(seconds=STALE_AFTER_BEATS * interval)
    silent = now - last_seen
    if silent <= stale_window:
        return "alive"
    return "gone" if silent > max(GONE_AFTER, GONE_AFTER_STALE_WINDOWS * stale_window) else "stale"


def _moment(raw: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


def thread_views(activity: Any, now: datetime) -> list[ThreadView]:
    """The threads of a heartbeat's ``activity``; anything malformed is left out."""
    threads = activity.get("threads") if isinstance(activity, dict) else None
    views = []
    for raw in threads if isinstance(threads, list) else []:
        if not isinstance(raw, dict) or not isinstance(raw.get("thread"), str):
            continue
        lease_until = _moment(raw.get("lease_until"))
        job_id = raw.get("job_id") if isinstance(raw.get("job_id"), str) else None
        views.append(
            ThreadView(
                thread=raw["thread"],
                job_id=job_id,
                type=raw.get("type") if isinstance(raw.get("type"), str) else None,
                attempt=raw.get("attempt") if isinstance(raw.get("attempt"), int) else None,
                since=_moment(raw.get("since")),
                lease_until=lease_until,
                # by the page's clock, or by the worker's own when it said so at its last beat
                past_lease=job_id is not None
                and (raw.get("past_lease") is True or (lease_until is not None and lease_until < now)),
            )
        )
    return views


def supervised(activity: Any) -> Supervised | None:
    """The ``process`` a heartbeat's ``activity`` names (a supervisor's child), or ``None``."""
    raw = activity.get("process") if isinstance(activity, dict) else None
    if not isinstance(raw, dict):
        return None
    values = [raw.get(name) for name in ("index", "processes", "supervisor_pid")]
    numbers = [value for value in values if isinstance(value, int) and not isinstance(value, bool)]
    return Supervised(*numbers) if len(numbers) == len(values) else None


def cleanup_interval(activity: Any) -> float | None:
    value = activity.get("cleanup_interval_seconds") if isinstance(activity, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


WORKERS_SQL = query("worker_rows")
RUNNING_SQL = query("running_jobs")


def board(now: datetime) -> WorkerBoard:
    """Every known process with its state, threads and held jobs (alive first, then stale,
    gone, stopped; newest start first within each), and the running jobs nobody alive holds."""
    with reading() as conn:
        rows = conn.execute(WORKERS_SQL).mappings().all()
        running = [
            HeldJob(str(r["id"]), r["type"], r["locked_by"], r["locked_until"])
            for r in conn.execute(RUNNING_SQL).mappings()
        ]
    views = [
        dict(row, state=state_of(row["last_seen"], row["stopped_at"], row["interval_seconds"], now))
        for row in rows
    ]
    # A pid can come back after a restart: jobs go to the newest row of that host:pid.
    owner: dict[str, dict[str, Any]] = {}
    for view in sorted(views, key=lambda v: v["started_at"]):
        owner[f"{view['host']}:{view['pid']}:"] = view
    held: dict[str, list[HeldJob]] = {}
    orphaned: list[HeldJob] = []
    for job in running:
        prefix = ":".join(job.locked_by.split(":")[:2]) + ":"
        newest = owner.get(prefix)
        if newest is not None:
            held.setdefault(newest["id"], []).append(job)
        if newest is None or newest["state"] != "alive":
            orphaned.append(job)
    workers = []
    for view in sorted(views, key=lambda v: STATE_ORDER[v["state"]]):  # stable: newest first within
        mine = held.get(view["id"], [])
        activity = view.pop("activity", None)
        live = view["state"] == "alive"
        workers.append(
            WorkerView(
                **{
                    **view,
                    "job_types": list(view["job_types"] or []),
                    "held": mine[:HELD_SHOWN],
                    "held_count": len(mine),
                    "thread_views": thread_views(activity, now) if live else [],
                    "cleanup_interval_seconds": cleanup_interval(activity),
                    "supervised": supervised(activity),
                }
            )
        )
    return WorkerBoard(workers=workers, orphaned=orphaned[:HELD_SHOWN], orphaned_count=len(orphaned))


LIVE_TYPES_SQL = query("worker_live_types")


def live_job_types(now: datetime) -> tuple[int, set[str]]:
    """How many processes are alive, and the job types they have handlers for."""
    with reading() as conn:
        rows = conn.execute(LIVE_TYPES_SQL, {"since": now - timedelta(hours=1)}).mappings().all()
    alive = [
        r for r in rows if state_of(r["last_seen"], r["stopped_at"], r["interval_seconds"], now) == "alive"
    ]
    return len(alive), {t for r in alive for t in (r["job_types"] or [])}
