"""A job whose attempts keep expiring must not capture every worker thread, and the demo
types exist only where ``JOB_DEMO_HANDLERS`` is on."""

from __future__ import annotations

import pytest

from dashboard.config.rules import INT_MAX, PRIORITY_MAX
from dashboard.store.lifecycle import create as enqueue
from tests.support.worker_loop import event_types, job, wait_for_status, wait_until

pytestmark = pytest.mark.process


def test_a_job_whose_lease_keeps_expiring_holds_one_thread_and_other_jobs_still_run(app, start_worker):
    # The capture case: an hour-long sleep that never renews, retried for ever. Its higher
    # priority makes it the first pick of every free thread whenever it is queued, so without
    # the rule the second thread is captured too and the later job never runs.
    poison = enqueue.create_job(
        enqueue.JobSpec("demo.timeout", {"sleep_seconds": 3600}, max_attempts=INT_MAX, priority=PRIORITY_MAX)
    ).job
    worker = start_worker(
        JOB_WORKER_THREADS="2",
        JOB_WORKER_LEASE_SECONDS="0.5",
        JOB_WORKER_CLEANUP_INTERVAL_SECONDS="0.1",
        JOB_WORKER_BACKOFF_BASE_SECONDS="0",  # requeued jobs are claimable again at once
        JOB_WORKER_BACKOFF_MAX_SECONDS="0",
    )
    wait_until(lambda: "timeout_requeued" in event_types(poison.id), 15, "the first lease to expire")
    after = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job

    wait_for_status(after.id, "succeeded", timeout=10)
    assert worker.proc.poll() is None
    still = job(poison.id)
    assert still.status == "queued" and still.attempts == 1  # nobody else took it meanwhile
    assert event_types(poison.id).count("claimed") == 1
