"""Signals: the first stops claiming and lets running jobs finish; a second exits at once."""

from __future__ import annotations

import signal

import pytest

from dashboard.store.lifecycle import create as enqueue
from tests.support.worker_loop import event_types, events, job, wait_for_status

pytestmark = pytest.mark.process


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_during_a_slow_job_lets_it_finish_claims_nothing_new_and_exits_0(app, start_worker, sig):
    slow = enqueue.create_job(enqueue.JobSpec("demo.slow", {"sleep_seconds": 1.5})).job
    worker = start_worker(JOB_WORKER_LEASE_SECONDS="1")
    wait_for_status(slow.id, "running")

    worker.send(sig)
    worker.wait_for_output(f"{sig.name} received: no new claims")
    waiting = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job

    assert worker.wait(timeout=30) == 0
    finished = job(slow.id)
    assert finished.status == "succeeded" and finished.attempts == 1
    assert event_types(slow.id)[-1] == "succeeded"
    untouched = job(waiting.id)
    assert untouched.status == "queued" and untouched.attempts == 0
    assert event_types(waiting.id) == ["created"]
    assert worker.output.rstrip().endswith("worker stopped")


def test_second_signal_exits_at_once_leaving_the_job_to_lease_recovery(app, start_worker):
    slow = enqueue.create_job(enqueue.JobSpec("demo.slow", {"sleep_seconds": 60})).job
    worker = start_worker(JOB_WORKER_LEASE_SECONDS="1")
    wait_for_status(slow.id, "running")

    worker.send(signal.SIGTERM)
    worker.wait_for_output("SIGTERM received")
    worker.send(signal.SIGTERM)

    assert worker.wait(timeout=15) == 128 + signal.SIGTERM
    assert "second signal: exiting now" in worker.output
    left = job(slow.id)
    assert left.status == "running" and left.attempts == 1  # the rescue's business now


def test_shutdown_timeout_hands_the_running_job_back_at_once(app, start_worker):
    """Past JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS the worker requeues its running attempts (fenced,
    with their event) and exits 0, instead of waiting to be killed."""
    slow = enqueue.create_job(enqueue.JobSpec("demo.slow", {"sleep_seconds": 60})).job
    worker = start_worker(JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS="0.5")
    wait_for_status(slow.id, "running")

    worker.send(signal.SIGTERM)

    assert worker.wait(timeout=15) == 0
    back = job(slow.id)
    assert (back.status, back.attempts, back.locked_by) == ("queued", 1, None)
    assert back.available_at == back.updated_at  # claimable at once, no backoff
    assert back.last_error.startswith("WorkerStopped: the worker stopped (0.5 s after the signal")
    last = events(slow.id)[-1]
    assert (last.type, last.attempt, last.data["handed_back"]) == ("retry_scheduled", 1, True)
    assert "handed back, now queued" in worker.output
