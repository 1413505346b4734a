"""Why is this queued job not running? Every reason that holds, as plain data that
``templates/fragments/why_not_running.html`` puts into words:

- ``parents``: it waits for its parents (``depends_on``): the ones not yet done, with their
  states (under ``on_parent_failure`` ``run`` a parent that ended either way is done; under
  ``wait`` a failed parent stays awaited until a retry of it succeeds). The only reason given:
  no worker may claim it before they release it, so its queue and the workers are beside
  the point;
- ``scheduled``: its ``available_at`` is later (created with a delay);
- ``backing_off``: an attempt failed and the retry waits for its backoff (retry n of m, the
  last error);
- ``paused``: its queue is paused (by whom, since when);
- ``queue_full``: its queue is at its concurrency limit (how many of how many run);
- ``rate_limited``: its queue's rate window is full (until when); a queue that holds the job
  back so is the only reason given beside the job's own time (no worker may claim it, so what
  the workers do is beside the point, and "waiting for a free worker" would be false);
- ``no_worker``: no worker process is alive (heartbeats, ``store/workers.py``);
- ``no_queue_worker``: live workers exist but none serves its queue (each serves the queues of
  its ``--queues``, or every queue without it; their heartbeats say which);
- ``no_handler``: live workers serve its queue but none has a handler for its type;
- ``waiting``: it is due and waits for a free worker, with the number of jobs ahead of it in
  its queue's claim order, counted up to :data:`AHEAD_CAP` (two bounded range scans of
  job_queue_claim_idx: higher priorities that are due, then the same priority earlier in
  order; workers visit the queues in a random order, so other queues' jobs are not ahead of
  it, they share the workers with it), and the threads of the live workers that serve its
  queue and handle its type: how many, how many busy, and how many of those are stuck in a
  handler past its lease (their heartbeats, ``store/workers.py``). A stuck thread is
  busy: it claims nothing until its handler returns, whatever the rescue did with its job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..reading import reading
from ..records import JobRecord
from ..sql import query
from . import queues as read_queues
from . import workflows as read_workflows
from .capacity import capacity

AHEAD_CAP = 1000

AHEAD_SQL = query("jobs_ahead")


@dataclass(frozen=True)
class Reason:
    kind: str
    values: dict[str, Any] = field(default_factory=dict)


def jobs_ahead(job: JobRecord, now: datetime) -> int:
    """Due queued jobs ahead of ``job`` in its queue's claim order, at most ``AHEAD_CAP + 1``."""
    params = {
        "queue": job.queue,
        "priority": job.priority,
        "now": now,
        "available_at": job.available_at,
        "created_at": job.created_at,
        "id": job.id,
        "cap": AHEAD_CAP + 1,
    }
    with reading() as conn:
        ahead: int = conn.execute(AHEAD_SQL, params).scalar_one()
    return min(ahead, AHEAD_CAP + 1)


def why_not_running(job: JobRecord, now: datetime) -> list[Reason]:
    """The reasons a queued job is not running now; empty for any other status."""
    if job.status != "queued":
        return []
    if job.waiting:
        return [awaited(job)]
    reasons: list[Reason] = []
    due = job.available_at <= now
    if not due:
        wait = (job.available_at - now).total_seconds()
        if job.attempts > 0:
            values = {
                "retry": job.attempts + 1,
                "of": job.max_attempts,
                "seconds": wait,
                "error": job.last_error,
            }
            reasons.append(Reason("backing_off", values))
        else:
            reasons.append(Reason("scheduled", {"at": job.available_at, "seconds": wait}))
    queue = read_queues.get_queue(job.queue, now=now)
    held = _held_by_queue(queue, due)
    if held:  # the queue holds it back: whatever the workers could do, they may not claim it
        return reasons + held
    live = capacity(now, job.type, job.queue)
    if live.alive == 0:
        reasons.append(Reason("no_worker"))
    elif not live.serves(job.queue):
        reasons.append(
            Reason("no_queue_worker", {"queue": job.queue, "served": live.served, "alive": live.alive})
        )
    elif job.type not in live.types:
        reasons.append(
            Reason("no_handler", {"type": job.type, "types": sorted(live.types), "alive": live.alive})
        )
    elif due:
        ahead = jobs_ahead(job, now)
        values = {
            "ahead": ahead,
            "capped": ahead > AHEAD_CAP,
            "cap": AHEAD_CAP,
            "threads": live.threads,
            "busy": live.busy,
            "stuck": live.stuck,
        }
        reasons.append(Reason("waiting", values))
    return reasons


def awaited(job: JobRecord) -> Reason:
    """The ``parents`` reason of a waiting job: its parents not yet done (at most 100, by
    primary key), how many it waits for, and its policy."""
    policy = job.on_parent_failure or "cancel"
    found = read_workflows.parents(job.depends_on or [])
    ended = ("succeeded", "failed", "cancelled") if policy == "run" else ("succeeded",)
    values = {
        "waiting_on": job.waiting_on,
        "parents": [parent for parent in found if parent.state not in ended],
        "policy": policy,
    }
    return Reason("parents", values)


def _held_by_queue(queue: read_queues.QueueInfo | None, due: bool) -> list[Reason]:
    """The queue's own hold: paused (alone: nothing is claimed from it, whatever its limits),
    else, for a due job, a full concurrency limit and a full rate window."""
    if queue is None:
        return []
    if queue.paused:
        return [Reason("paused", {"queue": queue.name, "by": queue.paused_by, "at": queue.paused_at})]
    held = []
    if queue.full and due:
        values = {"queue": queue.name, "running": queue.slots_held, "limit": queue.concurrency_limit}
        held.append(Reason("queue_full", values))
    if queue.rate_limited and due and queue.rate_limit is not None:
        values = {
            "queue": queue.name,
            "count": queue.rate_limit.count,
            "period": queue.rate_limit.period_seconds,
            "until": queue.rate_free_at,
        }
        held.append(Reason("rate_limited", values))
    return held
