"""What the live workers can take on, from their heartbeats (``jobs_worker``, ``workers.py``):

- :func:`capacity`: how many processes are alive, the job types they handle and the queues
  they serve, and for one type (in one queue) the threads of the processes that would claim it:
  how many, how many busy, how many stuck in a handler past its lease (``store/reads/why.py``, the
  banner and the Queues page use it);
- :func:`owner_of`: the process a running job's ``locked_by`` names, its state, the thread
  that runs the job (stuck or not), and when the rescue will take the job back (the job
  page says so when the owner stopped sending heartbeats).

The table is small (one row per process start, forgotten after a day); every read here is a
scan of its live rows or a lookup of one process.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..reading import reading
from ..sql import query
from ..workers import ThreadView, cleanup_interval, state_of, thread_views

LIVE_SQL = query("live_workers")
OWNER_SQL = query("worker_of_pid")


def serves(row: Any, queue: str) -> bool:
    """Whether the process of a heartbeat row claims from ``queue``: it named it in ``--queues``,
    or it named none (every queue; also a row written before the column existed)."""
    return not row["queues"] or queue in row["queues"]


@dataclass(frozen=True)
class Capacity:
    """The live processes, and the threads of those that handle a job type (:func:`capacity`)."""

    alive: int  # live processes
    types: frozenset[str]  # the job types they (those serving the queue asked about) have handlers for
    threads: int = 0  # threads of the live processes with a handler for the type asked about
    busy: int = 0  # of those, running an attempt
    stuck: int = 0  # of those, stuck in a handler past its lease
    queues: frozenset[str] = frozenset()  # the queues live processes named in their --queues
    every_queue: bool = False  # a live process named none: it serves every queue

    def serves(self, queue: str) -> bool:
        """Whether some live process claims from ``queue``."""
        return self.every_queue or queue in self.queues

    @property
    def served(self) -> list[str] | None:
        """The queues the live processes serve, by name; ``None``: every queue."""
        return None if self.every_queue else sorted(self.queues)


def capacity(now: datetime, job_type: str | None = None, queue: str | None = None) -> Capacity:
    """How many processes are alive, their job types and their queues; with ``queue``, the
    types are those of the live processes that serve it; with ``job_type`` (and ``queue``), the
    threads of the live processes that handle it (and serve that queue): how many, how many
    busy, how many stuck past a lease."""
    with reading() as conn:
        rows = conn.execute(LIVE_SQL, {"since": now - timedelta(hours=1)}).mappings().all()
    alive = [
        r for r in rows if state_of(r["last_seen"], r["stopped_at"], r["interval_seconds"], now) == "alive"
    ]
    serving_queue = [r for r in alive if queue is None or serves(r, queue)]
    serving = [r for r in serving_queue if job_type is not None and job_type in (r["job_types"] or [])]
    stuck = sum(len([t for t in thread_views(r["activity"], now) if t.past_lease]) for r in serving)
    return Capacity(
        alive=len(alive),
        types=frozenset(t for r in serving_queue for t in (r["job_types"] or [])),
        threads=sum(r["threads"] for r in serving),
        busy=sum(min(r["busy"], r["threads"]) for r in serving),
        stuck=stuck,
        queues=frozenset(q for r in alive for q in (r["queues"] or [])),
        every_queue=any(not r["queues"] for r in alive),
    )


@dataclass(frozen=True)
class Owner:
    """The process a running job's ``locked_by`` names, as its heartbeats tell (``state``
    ``unknown``: no row), and when the rescue will take the job back."""

    host: str
    pid: str
    state: str  # alive | stale | gone | stopped | unknown
    last_seen: datetime | None
    thread: ThreadView | None  # its thread running this job, when the owner is alive and says so
    live_workers: int
    recover_at: datetime | None  # lease end + the soonest live rescuer interval; None: no live worker


def owner_of(locked_by: str, locked_until: datetime, job_id: str, now: datetime) -> Owner:
    """The owner of a running job and the estimate of its recovery: at the lease's end plus the
    shortest cleanup interval a live worker reported (its rescuer runs that often)."""
    host, _, rest = locked_by.partition(":")
    pid = rest.partition(":")[0]
    with reading() as conn:
        row = None
        if pid.isdigit() and int(pid) < 2**31:
            row = conn.execute(OWNER_SQL, {"host": host, "pid": int(pid)}).mappings().first()
        live = conn.execute(LIVE_SQL, {"since": now - timedelta(hours=1)}).mappings().all()
    alive = [
        r for r in live if state_of(r["last_seen"], r["stopped_at"], r["interval_seconds"], now) == "alive"
    ]
    intervals = [i for r in alive if (i := cleanup_interval(r["activity"])) is not None]
    recover_at = None
    if alive:
        recover_at = max(locked_until, now) + timedelta(seconds=min(intervals) if intervals else 0)
    if row is None:
        return Owner(host, pid, "unknown", None, None, len(alive), recover_at)
    state = state_of(row["last_seen"], row["stopped_at"], row["interval_seconds"], now)
    thread = None
    if state == "alive":
        thread = next((t for t in thread_views(row["activity"], now) if t.job_id == job_id), None)
    return Owner(host, pid, state, row["last_seen"], thread, len(alive), recover_at)
