"""Named queues against real worker processes: served queues beside a backlog, a pause that
survives a restart and is lifted by NOTIFY, concurrency and rate limits held across processes
and threads, sampled from the database while they run."""

from __future__ import annotations

import signal
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.flow import queues
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from tests.support.waiting import wait_until

pytestmark = pytest.mark.process


def status(job_id) -> str:
    with db.engine.connect() as conn:
        return conn.execute(text("SELECT status FROM jobs_job WHERE id = :id"), {"id": job_id}).scalar_one()


def count(sql: str, **params) -> int:
    with db.engine.connect() as conn:
        return conn.execute(text(sql), params).scalar_one()


def count_pair(sql: str) -> tuple[int, int]:
    with db.engine.connect() as conn:
        first, second = conn.execute(text(sql)).one()
        return first, second


def backlog(queue: str, rows: int) -> None:
    """``rows`` queued jobs of ``queue``, inserted in one statement (older than any job after)."""
    with db.engine.begin() as conn:
        conn.execute(text("INSERT INTO jobs_queue (name) VALUES (:q) ON CONFLICT DO NOTHING"), {"q": queue})
        conn.execute(
            text(
                "INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts, "
                "max_attempts, last_error, created_at, updated_at, queue) "
                "SELECT gen_random_uuid(), 'demo.success', '{}', 'queued', 50, now() - interval '1 hour', "
                "0, 3, '', now() - interval '1 hour', now(), :q FROM generate_series(1, :n)"
            ),
            {"q": queue, "n": rows},
        )
        conn.execute(text("ANALYZE jobs_job"))


def test_a_worker_serving_a_quiet_queue_takes_its_job_beside_a_backlog(app, start_worker):
    backlog("reports", 50_000)
    # Polling every 10 minutes, and idle before the job exists: only the wake-up on its
    # creation can explain its pickup, beside the backlog it must not touch.
    worker = start_worker("--queues", "mail", "--log-level", "debug", JOB_WORKER_POLL_INTERVAL_MS="600000")
    worker.wait_for_output("listening for new jobs")
    worker.wait_for_output("nothing to claim")
    job = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0}, queue="mail")).job
    wait_until(lambda: status(job.id) == "succeeded", 30, "the quiet queue's job to run")
    assert count("SELECT count(*) FROM jobs_job WHERE queue = 'reports' AND status <> 'queued'") == 0


def test_a_worker_serving_every_queue_takes_a_quiet_queue_s_job_while_it_drains_a_backlog(app, start_worker):
    """Between queues no job is ahead of another: a worker busy with an older backlog of a
    higher priority in one queue takes a new job of another queue within a few claims, not
    after the backlog (which, ranked by priority and age across queues, would all come first)."""
    backlog("reports", 20_000)
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE jobs_job SET priority = 90 WHERE queue = 'reports'"))
    worker = start_worker()  # two threads
    wait_until(lambda: count("SELECT count(*) FROM jobs_job WHERE status = 'succeeded'") > 0, 30, "the drain")
    job = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0}, queue="mail", priority=0)).job
    wait_until(lambda: status(job.id) == "succeeded", 30, "the quiet queue's job to run")
    left = count("SELECT count(*) FROM jobs_job WHERE queue = 'reports' AND status = 'queued'")
    assert left > 10_000, f"the mail job ran only after {20_000 - left} of the backlog's jobs"
    worker.send(signal.SIGTERM)
    assert worker.wait() == 0


def test_an_unset_queues_serves_a_queue_that_appears_after_the_start(app, start_worker):
    worker = start_worker()
    worker.wait_for_output("listening for new jobs")
    job = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0}, queue="brand-new")).job
    wait_until(lambda: status(job.id) == "succeeded", 10, "the new queue's job to run")


def test_a_pause_holds_across_a_worker_restart_and_resume_wakes_the_worker(app, start_worker):
    queues.pause("mail", actor="ops")
    held = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0}, queue="mail")).job
    other = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0}, queue="other")).job
    first = start_worker(JOB_WORKER_POLL_INTERVAL_MS="100")
    wait_until(lambda: status(other.id) == "succeeded", 10, "the other queue's job")
    assert status(held.id) == "queued"  # claimed within a few claims, had it not been paused
    first.send(signal.SIGTERM)
    assert first.wait() == 0
    # Polling every 10 minutes: after the restart's first claim pass, only the resume's
    # NOTIFY can explain the held job's pickup.
    second = start_worker("--log-level", "debug", JOB_WORKER_POLL_INTERVAL_MS="600000")
    second.wait_for_output("listening for new jobs")
    second.wait_for_output("nothing to claim")
    assert status(held.id) == "queued"
    queues.resume("mail", actor="ops")
    wait_until(lambda: status(held.id) == "succeeded", 30, "the resumed queue's job")


class Sampler:
    """Counts a queue's running jobs every few milliseconds while the test runs."""

    def __init__(self, app, queue: str) -> None:
        self.app, self.queue, self.seen, self.stop = app, queue, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with self.app.app_context(), db.engine.connect() as conn:
            sql = text("SELECT count(*) FROM jobs_job WHERE status = 'running' AND queue = :q")
            while not self.stop.is_set():
                self.seen.append(conn.execute(sql, {"q": self.queue}).scalar_one())
                conn.rollback()
                time.sleep(0.003)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def overlap_max(queue: str) -> int:
    """The most attempts of ``queue`` that were running at one instant, from the events: each
    attempt runs from its `claimed` event to its outcome (both written by the statement that
    took and freed its slot), in the order their transactions wrote them: by the first event
    id of each transaction, and within one (a one-job thread's settle-and-claim) the outcome
    before the claim. Not by their times: a statement is stamped when it starts, and on a
    loaded machine a claim that started before another attempt's settle may take the slot that
    settle freed, stamped earlier than the settle that made room for it; its event ids are
    drawn after it took the slot, so after every id of the freeing transaction."""
    with db.engine.connect() as conn:
        rows = conn.execute(
            text(
                """
                SELECT min(e.id) OVER (PARTITION BY e.xmin::text) AS written,
                       CASE WHEN e.type = 'claimed' THEN 1 ELSE -1 END AS d
                FROM jobs_jobevent AS e JOIN jobs_job AS j ON j.id = e.job_id
                WHERE j.queue = :q AND e.type IN ('claimed', 'succeeded', 'retry_scheduled', 'failed',
                                                  'timeout_requeued')
                ORDER BY written, d
                """
            ),
            {"q": queue},
        ).all()
    running = most = 0
    for _, d in rows:
        running += d
        most = max(most, running)
    return most


@pytest.mark.parametrize("limit", [1, 3])
def test_a_concurrency_limit_holds_across_processes_and_threads_and_is_reached(app, start_worker, limit):
    queues.set_limits("lim", concurrency_limit=limit)
    jobs = 24
    enqueue.create_jobs([JobSpec("demo.success", {"sleep_seconds": 0.05}) for _ in range(jobs)], queue="lim")
    with Sampler(app, "lim") as sampler:
        for _ in range(3):
            start_worker(JOB_WORKER_THREADS="4", JOB_WORKER_POLL_INTERVAL_MS="20")
        wait_until(
            lambda: (
                count("SELECT count(*) FROM jobs_job WHERE queue = 'lim' AND status = 'succeeded'") == jobs
            ),
            60,
            "every limited job to succeed",
        )
    assert max(sampler.seen) <= limit, sampler.seen
    assert overlap_max("lim") == limit  # never exceeded, and reached
    assert count("SELECT count(*) FROM jobs_queue_slot WHERE queue = 'lim' AND job_id IS NOT NULL") == 0


def test_a_rate_limit_holds_across_processes_and_workers_wait_for_the_window(app, start_worker):
    queues.set_limits("rated", rate_limit={"count": 5, "period_seconds": 1})
    jobs = 20
    enqueue.create_jobs([JobSpec("demo.success", {"sleep_seconds": 0}) for _ in range(jobs)], queue="rated")
    # A poll interval far longer than the test: after the first window only the wait for the
    # next window (no NOTIFY announces it) can claim the rest, for a worker serving every
    # queue (up to its poll interval) and for one serving only the limited queue (past it).
    start_worker(JOB_WORKER_THREADS="3", JOB_WORKER_POLL_INTERVAL_MS="120000")
    start_worker(JOB_WORKER_THREADS="3", JOB_WORKER_POLL_INTERVAL_MS="120000", JOB_WORKER_QUEUES="rated")
    wait_until(
        lambda: count("SELECT count(*) FROM jobs_job WHERE queue = 'rated' AND status = 'succeeded'") == jobs,
        60,
        "every rate-limited job to succeed, each window claimed when it opened",
    )
    with db.engine.connect() as conn:
        claims = sorted(
            conn.execute(
                text(
                    "SELECT e.created_at FROM jobs_jobevent AS e JOIN jobs_job AS j ON j.id = e.job_id "
                    "WHERE j.queue = 'rated' AND e.type = 'claimed'"
                )
            ).scalars()
        )
    window = timedelta(seconds=1)
    most = max(sum(1 for t in claims if start <= t < start + window) for start in claims)
    assert most <= 5
    assert most == 5  # the window was filled
    assert claims[-1] - claims[0] >= timedelta(seconds=3)  # 20 claims at 5 per second: 3 s at least


def test_a_lease_recovery_frees_the_slot_of_a_worker_that_died(app, start_worker):
    queues.set_limits("lim", concurrency_limit=1)
    stuck = enqueue.create_job(JobSpec("demo.slow", {"sleep_seconds": 30}, queue="lim")).job
    victim = start_worker(JOB_WORKER_THREADS="1")
    wait_until(lambda: status(stuck.id) == "running", 10, "the slow job to start")
    victim.proc.kill()
    nxt = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0}, queue="lim")).job
    start_worker(JOB_WORKER_THREADS="2")
    wait_until(
        lambda: status(nxt.id) == "succeeded", 20, "the next job, once the dead worker's slot is freed"
    )
    # Every held slot belongs to a running attempt of the queue (the recovered job's retry may
    # be one), read in one snapshot: the dead worker's slot was freed, not left behind.
    held, running = count_pair(
        "SELECT (SELECT count(*) FROM jobs_queue_slot WHERE queue = 'lim' AND job_id IS NOT NULL),"
        " (SELECT count(*) FROM jobs_queue_slot AS s JOIN jobs_job AS j"
        "  ON j.id = s.job_id AND j.attempts = s.attempt AND j.status = 'running' WHERE s.queue = 'lim')"
    )
    assert held == running
