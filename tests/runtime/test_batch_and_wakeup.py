"""Batch mode and NOTIFY wake-ups, on the real ``flask worker`` process."""

from __future__ import annotations

import re
import signal
from collections import Counter

import pytest

from dashboard.store import values
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import stats as read_stats
from tests.support.worker_loop import event_types, events, job, wait_for_status, wait_until

pytestmark = pytest.mark.process


def test_batch_mode_settles_every_job_under_the_worker_id_that_claimed_it(app, start_worker):
    specs = [JobSpec("demo.success", {"sleep_seconds": 0}, priority=p % 7) for p in range(30)]
    specs += [JobSpec("demo.flaky", {"fail_until_attempt": 2}) for _ in range(3)]
    ids = [r.job.id for r in enqueue.create_jobs(specs)]
    start_worker(JOB_WORKER_THREADS="4", JOB_WORKER_BATCH_SIZE="4")

    def all_succeeded() -> bool:
        return read_stats.stats(values.utcnow()).by_status["succeeded"] == len(ids)

    wait_until(all_succeeded, 60, "every job succeeded")
    executors = set()
    claimed_at = {}
    for job_id in ids:
        events = read_jobs.job_events(job_id)
        claims = {e.attempt: e for e in events if e.type == "claimed"}
        done = [e for e in events if e.type == "succeeded"]
        assert len(done) == 1
        assert done[0].worker_id == claims[done[0].attempt].worker_id  # fenced per job
        executors.add(done[0].worker_id)
        claimed_at[job_id] = claims[1].created_at
    assert len(executors) > 1
    assert not any(":thread-0:" in w for w in executors)  # thread-0 is the rescuer
    assert all(re.search(r":thread-\d+:", w) for w in executors)  # its lanes' ids
    # higher priority is never claimed after lower priority (all were queued before the start)
    jobs = {job_id: read_jobs.get_job(job_id) for job_id in ids}
    for a in ids:
        for b in ids:
            if jobs[a].priority > jobs[b].priority:
                assert claimed_at[a] <= claimed_at[b]


def test_batch_mode_recovers_expired_leases(app, start_worker):
    job = enqueue.create_job(JobSpec("demo.timeout", {"sleep_seconds": 3}, max_attempts=1)).job
    start_worker(JOB_WORKER_THREADS="2", JOB_WORKER_BATCH_SIZE="2", JOB_WORKER_LEASE_SECONDS="1")

    def failed():
        current = read_jobs.get_job(job.id)
        return current if current.status == "failed" else None

    recovered = wait_until(failed, 30, "the expired lease recovered")
    assert recovered.last_error.startswith("Lease expired")
    event = read_jobs.job_events(job.id)[-1]
    assert event.type == "failed" and ":thread-0:" in event.worker_id  # the rescuer recovered it


@pytest.mark.parametrize("batch", ["1", "4"])
def test_an_idle_worker_is_woken_by_notify_not_by_polling(app, start_worker, batch):
    # Polling every 10 minutes: only the notification can explain a prompt pickup.
    worker = start_worker(
        "--log-level", "debug", JOB_WORKER_POLL_INTERVAL_MS="600000", JOB_WORKER_BATCH_SIZE=batch
    )
    worker.wait_for_output("listening for new jobs")
    worker.wait_for_output("nothing to claim" if batch == "1" else "started (batch mode)")
    job = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0})).job

    def succeeded() -> bool:
        return read_jobs.get_job(job.id).status == "succeeded"

    wait_until(succeeded, 30, "the job picked up without a poll")


def test_the_rescuer_recovers_expired_leases_while_every_thread_is_busy(app, start_worker):
    from datetime import timedelta

    from tests.support.factories import make_job

    slow = enqueue.create_job(JobSpec("demo.slow", {"sleep_seconds": 6})).job
    worker = start_worker(JOB_WORKER_THREADS="1")  # its only thread will sit in demo.slow
    wait_until(lambda: read_jobs.get_job(slow.id).status == "running", 15, "the slow job running")
    dead = make_job(  # a job whose worker died: running, lease long over
        "running", locked_by="ghost:1:thread-1:dead", locked_until=values.utcnow() - timedelta(seconds=5)
    )

    def recovered():
        return [e for e in read_jobs.job_events(dead.id) if e.type == "timeout_requeued"]

    event = wait_until(recovered, 15, "the dead worker's job recovered")[0]
    assert ":thread-0:" in event.worker_id  # by the rescuer, not the busy thread
    assert read_jobs.get_job(slow.id).status == "running"  # ...while the only thread was still busy
    worker.kill()


def _claimed_by(job_id) -> str:
    return next(e.worker_id for e in read_jobs.job_events(job_id) if e.type == "claimed")


def _one_thread_short_leases(start_worker) -> None:
    """One executor, a batch of 2 (so a job waits claimed ahead of a busy thread), 2 s leases
    and a rescuer looking every 0.2 s."""
    start_worker(
        JOB_WORKER_THREADS="1",
        JOB_WORKER_BATCH_SIZE="2",
        JOB_WORKER_LEASE_SECONDS="2",
        JOB_WORKER_CLEANUP_INTERVAL_SECONDS="0.2",
    )


def test_a_process_stuck_past_a_lease_stops_keeping_the_jobs_it_claimed_ahead(app, start_worker):
    """The one thread runs a handler that stopped renewing (``demo.timeout``, twice the lease).
    Once that attempt is past its lease the dispatcher no longer renews the job claimed ahead
    of it, so that job is not held by a stuck process: its lease lapses, the rescue
    requeues it, and it runs on a later attempt."""
    stuck = enqueue.create_job(JobSpec("demo.timeout", {}, priority=90, max_attempts=1)).job
    ahead = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0})).job
    _one_thread_short_leases(start_worker)
    wait_for_status(ahead.id, "succeeded", timeout=30)
    kinds = event_types(ahead.id)
    assert "timeout_requeued" in kinds and kinds[-1] == "succeeded"
    assert job(ahead.id).attempts == 2
    wait_for_status(stuck.id, "failed", timeout=30)


def test_batch_mode_claims_a_job_ahead_on_a_lane_of_its_own(app, start_worker):
    """The process holds a job claimed ahead while its one thread runs another: the
    job waited past half its lease, so the lease is renewed before its handler starts."""
    slow = enqueue.create_job(JobSpec("demo.slow", {"sleep_seconds": 2.5}, priority=90)).job
    ahead = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0})).job
    start_worker(JOB_WORKER_THREADS="1", JOB_WORKER_BATCH_SIZE="2", JOB_WORKER_LEASE_SECONDS="4")
    wait_for_status(ahead.id, "running")
    assert job(slow.id).status == "running"  # both held by the process, one thread
    wait_for_status(ahead.id, "succeeded", timeout=30)
    assert job(slow.id).status == "succeeded"
    one, two = _claimed_by(slow.id), _claimed_by(ahead.id)
    assert one != two and one.split(":")[:2] == two.split(":")[:2]  # two lanes of one host:pid
    # lanes keep the contract's id format, numbered after the 1 executor, dispatcher, completer
    assert all(int(re.search(r":thread-(\d+):", w).group(1)) >= 4 for w in (one, two))
    kinds = event_types(ahead.id)  # demo.success also reports progress
    assert kinds[:3] == ["created", "claimed", "lease_renewed"] and kinds[-1] == "succeeded"
    assert job(ahead.id).attempts == 1


def test_batch_mode_holds_at_most_twice_the_batch_claimed_ahead_of_busy_threads(app, start_worker):
    """A process has threads + CLAIM_AHEAD (2) x batch size lanes, one attempt each.
    With its one thread in a long handler it claims two batches ahead (each claim statement
    at most a batch), then nothing more: the other jobs stay queued for other workers."""
    ids = [enqueue.create_job(JobSpec("demo.slow", {"sleep_seconds": 60})).job.id for _ in range(9)]
    start_worker(JOB_WORKER_THREADS="1", JOB_WORKER_BATCH_SIZE="2")

    def held() -> int:
        return sum(job(job_id).status == "running" for job_id in ids)

    wait_until(lambda: held() == 5, 30, "1 running and 2 x 2 claimed ahead")
    claims = [e for job_id in ids for e in events(job_id) if e.type == "claimed"]
    assert len(claims) == 5 and len({e.worker_id for e in claims}) == 5  # one lane each
    per_statement = Counter(e.created_at for e in claims)  # one statement, one `now`
    assert max(per_statement.values()) <= 2, per_statement  # each claim at most a batch
    assert sum(job(job_id).status == "queued" for job_id in ids) == 4


def test_a_job_claimed_ahead_keeps_its_lease_while_it_waits_longer_than_the_lease(app, start_worker):
    """The one thread runs a 4 s handler while a job claimed ahead waits, twice as
    long as the 2 s lease. The dispatcher keeps that lease, so the job is never recovered: it
    runs once, on its first attempt, with renewals on its timeline before it starts."""
    slow = enqueue.create_job(JobSpec("demo.slow", {"sleep_seconds": 4}, priority=90)).job
    ahead = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0})).job
    _one_thread_short_leases(start_worker)
    wait_for_status(ahead.id, "running")
    wait_for_status(ahead.id, "succeeded", timeout=30)
    kinds = event_types(ahead.id)
    assert "timeout_requeued" not in kinds and "retry_scheduled" not in kinds
    assert kinds[:2] == ["created", "claimed"] and kinds.count("claimed") == 1
    assert kinds.count("lease_renewed") >= 2 and kinds[-1] == "succeeded"
    assert job(ahead.id).attempts == 1 and job(slow.id).status == "succeeded"
    # its run time counts from when the thread took it, not from the claim it waited after
    timeline = {e.type: e for e in events(ahead.id)}
    held_ms = (timeline["succeeded"].created_at - timeline["claimed"].created_at).total_seconds() * 1000
    assert timeline["succeeded"].data["run_ms"] < held_ms - 2000  # it waited for the 4 s handler


def test_shutdown_timeout_hands_back_a_job_claimed_ahead_with_the_running_one(app, start_worker):
    slow = enqueue.create_job(JobSpec("demo.slow", {"sleep_seconds": 60}, priority=90)).job
    ahead = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0})).job
    worker = start_worker(
        JOB_WORKER_THREADS="1", JOB_WORKER_BATCH_SIZE="2", JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS="0.5"
    )
    wait_for_status(ahead.id, "running")

    worker.send(signal.SIGTERM)

    assert worker.wait(timeout=15) == 0
    for job_id in (slow.id, ahead.id):
        back = job(job_id)
        assert (back.status, back.attempts, back.locked_by) == ("queued", 1, None)
        last = events(job_id)[-1]
        assert (last.type, last.attempt, last.data["handed_back"]) == ("retry_scheduled", 1, True)
    assert event_types(ahead.id) == ["created", "claimed", "retry_scheduled"]  # never started
