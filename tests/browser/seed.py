"""Jobs made for the browser tests, straight through the store (no worker needed)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from dashboard.store import lifecycle, values, workers
from dashboard.store.flow import queues
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.records import JobRecord
from tests.support.factories import make_job

LONG_WORD = "x" * 3000  # a message with no space to break at


@dataclass(frozen=True)
class Seeded:
    failed: JobRecord  # failed for good, its error one long word
    running: JobRecord  # running with a long lease and many progress events
    ready_old: JobRecord  # the oldest ready job, due two hours ago
    cancelled: JobRecord | None = None  # cancelled by an operator (stored as failed)
    orphan: JobRecord | None = None  # running, held by a process that stopped sending heartbeats


def fail_for_good(type_: str, error: str) -> JobRecord:
    job = enqueue.create_job(enqueue.JobSpec(type_, {"n": 1}, max_attempts=1)).job
    claimed = lifecycle.claim_jobs("seed-worker", lease_seconds=60)
    assert [c.id for c in claimed] == [job.id]
    failed = lifecycle.fail_job(
        job.id, "seed-worker", 1, error, backoff_base_seconds=1, backoff_max_seconds=1
    )
    assert failed is not None and failed.status == "failed"
    return failed


def run_long(progress_events: int, *, payload: dict | None = None) -> JobRecord:
    """A running job whose worker has reported ``progress_events`` times (no worker runs it)."""
    job = enqueue.create_job(enqueue.JobSpec("demo.slow", payload or {"sleep_seconds": 240})).job
    claimed = lifecycle.claim_jobs("seed-worker", lease_seconds=3600)
    assert [c.id for c in claimed] == [job.id]
    add_progress(job, progress_events)
    return job


def add_progress(job: JobRecord, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        percent = min(99, i // 5)
        lifecycle.record_progress(job.id, "seed-worker", 1, message=f"step {i}", data={"percent": percent})
        if i % 10 == 0:
            lifecycle.renew_lease(job.id, "seed-worker", 1, lease_seconds=3600)


def seed_pages() -> Seeded:
    """One job of each kind the pages show, including the long unbroken texts."""
    failed = fail_for_good("demo.fail", "Boom:" + LONG_WORD)
    running = run_long(30)
    lifecycle.record_progress(running.id, "seed-worker", 1, message=LONG_WORD, data={"percent": 50})
    now = values.utcnow()
    ready_old = enqueue.create_job(
        enqueue.JobSpec("demo.success", {"note": LONG_WORD}, available_at=now - timedelta(hours=2))
    ).job
    enqueue.create_job(enqueue.JobSpec("demo.success", {}, available_at=now + timedelta(hours=1)))
    cancelled = enqueue.create_job(enqueue.JobSpec("mail.send", {"to": "x@example.org"})).job
    actions.run_one("cancel", cancelled.id, event_data={"actor": "olga", "role": "operator"})
    deleted = enqueue.create_job(enqueue.JobSpec("report.build", {})).job
    actions.run_one("cancel", deleted.id, event_data={"actor": "olga"})
    actions.run_one(
        "delete", deleted.id, event_data={"actor": "olga", "role": "operator", "source": "dashboard"}
    )
    orphan = seed_workers(now)
    held = enqueue.create_job(enqueue.JobSpec("mail.send", {}, queue="mail:" + LONG_WORD[:50])).job
    queues.pause(held.queue, actor="olga")
    queues.set_limits(
        "reports", concurrency_limit=2, rate_limit={"count": 10, "period_seconds": 60}, actor="olga"
    )
    return Seeded(
        failed=failed,
        running=running,
        ready_old=ready_old,
        cancelled=read_jobs.get_job(cancelled.id),
        orphan=orphan,
    )


def seed_workers(now) -> JobRecord:
    """Worker rows of every state: one alive with a thread stuck past its lease, one stale that
    still holds a running job (its owner stopped sending heartbeats), one gone, one stopped."""

    def me(pid: int, threads: int = 2) -> workers.Identity:
        return workers.Identity(f"seed-host:{pid}:x", "seed-host", pid, now, "one-job", threads, "1", 5.0,
                                ("demo.success", "demo.slow", "demo.fail"))  # fmt: skip

    past = (now - timedelta(seconds=45)).isoformat()
    stuck = {
        "threads": [
            {"thread": "thread-1", "job_id": "00000000-0000-4000-8000-000000000001", "type": "demo.timeout",
             "attempt": 1, "since": past, "lease_until": past},
            {"thread": "thread-2"},
        ],
        "cleanup_interval_seconds": 0.5,
    }  # fmt: skip
    workers.beat(me(101), jobs_done=7, now=now, activity=stuck)
    workers.beat(me(102), jobs_done=3, now=now - timedelta(seconds=40))
    workers.beat(me(103), jobs_done=1, now=now - timedelta(hours=2))
    workers.beat(me(104), jobs_done=2, now=now)
    workers.mark_stopped(me(104), jobs_done=2, now=now)
    return make_job(
        "running",
        type="demo.slow",
        locked_by="seed-host:102:thread-1:dead",
        locked_until=now + timedelta(hours=1),
    )
