"""Worker processes and their heartbeats (issue 17): the ``jobs_worker`` table.

Each ``flask worker`` process upserts its row every ``JOB_WORKER_HEARTBEAT_SECONDS``
(:func:`beat`, from ``runtime/heartbeat.py``) and marks it stopped on a clean exit
(:func:`mark_stopped`). A process is *alive* while its last heartbeat is younger than
:data:`STALE_AFTER_BEATS` of its own intervals, *stale* after that (killed, frozen, or cut off
from the database), *stopped* once it said so. The jobs a process holds are the running jobs
whose ``locked_by`` starts with ``host:pid:`` (``runtime/threads.make_worker_id``); the running
set is small and read through ``job_timeout_idx`` (its predicate is ``status = 'running'``).

Rows stopped or silent for :data:`FORGET_AFTER` are deleted by the living processes' heartbeats.
This table holds no job state: the queue never reads it to decide anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.types import Text

from ..extensions import db
from .read_timeout import reading

STALE_AFTER_BEATS = 3
FORGET_AFTER = timedelta(hours=24)
HELD_SHOWN = 20  # jobs listed per process

BEAT = text(
    """
    INSERT INTO jobs_worker AS w (id, host, pid, started_at, mode, threads, busy, jobs_done,
                                  last_seen, stopped_at, version, interval_seconds, job_types)
    VALUES (:id, :host, :pid, :started_at, :mode, :threads,
            LEAST(:threads, (SELECT count(*) FROM jobs_job
                             WHERE status = 'running' AND locked_by LIKE :prefix)),
            :jobs_done, :now, NULL, :version, :interval, :job_types)
    ON CONFLICT (id) DO UPDATE
    SET busy = EXCLUDED.busy, jobs_done = EXCLUDED.jobs_done, last_seen = EXCLUDED.last_seen,
        job_types = EXCLUDED.job_types
    """
).bindparams(bindparam("job_types", type_=ARRAY(Text)))

FORGET = text(
    "DELETE FROM jobs_worker WHERE COALESCE(stopped_at, last_seen) < :before AND last_seen < :before"
)
STOP = text(
    "UPDATE jobs_worker SET stopped_at = :now, last_seen = :now, busy = 0, jobs_done = :jobs_done "
    "WHERE id = :id"
)


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

    @property
    def prefix(self) -> str:
        """What the ``locked_by`` of this process's threads starts with."""
        return f"{self.host}:{self.pid}:"


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def beat(me: Identity, *, jobs_done: int, now: datetime) -> None:
    """Upsert this process's row (busy counted from the jobs it holds, at most its threads: in
    batch mode it also holds jobs claimed ahead of its threads) and forget old rows."""
    params = {
        "id": me.id,
        "host": me.host,
        "pid": me.pid,
        "started_at": me.started_at,
        "mode": me.mode,
        "threads": me.threads,
        "prefix": _like(me.prefix),
        "jobs_done": jobs_done,
        "now": now,
        "version": me.version,
        "interval": me.interval_seconds,
        "job_types": list(me.job_types),
    }
    with db.engine.begin() as conn:
        conn.execute(BEAT, params)
        conn.execute(FORGET, {"before": now - FORGET_AFTER})


def mark_stopped(me: Identity, *, jobs_done: int, now: datetime) -> None:
    with db.engine.begin() as conn:
        conn.execute(STOP, {"id": me.id, "now": now, "jobs_done": jobs_done})


@dataclass(frozen=True)
class HeldJob:
    id: str
    type: str
    locked_by: str
    locked_until: datetime


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
    state: str  # alive | stale | stopped
    held: list[HeldJob] = field(default_factory=list)
    held_count: int = 0

    @property
    def prefix(self) -> str:
        return f"{self.host}:{self.pid}:"


@dataclass(frozen=True)
class WorkerBoard:
    workers: list[WorkerView]
    orphaned: list[HeldJob]  # running jobs held by a process that is not alive (or unknown)
    orphaned_count: int

    @property
    def alive(self) -> list[WorkerView]:
        return [w for w in self.workers if w.state == "alive"]


def state_of(last_seen: datetime, stopped_at: datetime | None, interval: float, now: datetime) -> str:
    if stopped_at is not None:
        return "stopped"
    return "alive" if now - last_seen <= timedelta(seconds=STALE_AFTER_BEATS * interval) else "stale"


WORKERS_SQL = text("SELECT * FROM jobs_worker ORDER BY stopped_at IS NOT NULL, started_at DESC LIMIT 200")
RUNNING_SQL = text(
    "SELECT id, type, locked_by, locked_until FROM jobs_job WHERE status = 'running' "
    "ORDER BY locked_until LIMIT 5000"
)


def board(now: datetime) -> WorkerBoard:
    """Every known process with its state and held jobs, and the running jobs nobody alive holds."""
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
    owner: dict[str, dict] = {}
    for view in sorted(views, key=lambda v: v["started_at"]):
        owner[f"{view['host']}:{view['pid']}:"] = view
    held: dict[str, list[HeldJob]] = {}
    orphaned: list[HeldJob] = []
    for job in running:
        prefix = ":".join(job.locked_by.split(":")[:2]) + ":"
        view = owner.get(prefix)
        if view is not None:
            held.setdefault(view["id"], []).append(job)
        if view is None or view["state"] != "alive":
            orphaned.append(job)
    workers = []
    for view in views:
        mine = held.get(view["id"], [])
        workers.append(
            WorkerView(
                **{
                    **view,
                    "job_types": list(view["job_types"] or []),
                    "held": mine[:HELD_SHOWN],
                    "held_count": len(mine),
                }
            )
        )
    return WorkerBoard(workers=workers, orphaned=orphaned[:HELD_SHOWN], orphaned_count=len(orphaned))


LIVE_TYPES_SQL = text(
    "SELECT job_types, interval_seconds, last_seen, stopped_at FROM jobs_worker "
    "WHERE stopped_at IS NULL AND last_seen > :since"
)


def live_job_types(now: datetime) -> tuple[int, set[str]]:
    """How many processes are alive, and the job types they have handlers for."""
    with reading() as conn:
        rows = conn.execute(LIVE_TYPES_SQL, {"since": now - timedelta(hours=1)}).mappings().all()
    alive = [
        r for r in rows if state_of(r["last_seen"], r["stopped_at"], r["interval_seconds"], now) == "alive"
    ]
    return len(alive), {t for r in alive for t in (r["job_types"] or [])}
