"""Snooze in real worker processes, one-job mode and batch mode: the job comes back without
spending its attempts, each snooze on its timeline, and past JOB_MAX_SNOOZES it fails."""

from __future__ import annotations

import pytest

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from tests.support.worker_loop import event_types, wait_for_status

pytestmark = pytest.mark.process

MODULES = "tests.runtime.snooze_handlers"
MODES = pytest.mark.parametrize("batch_size", ["1", "4"], ids=["one-job", "batch"])


@MODES
def test_a_job_snoozes_then_succeeds_with_its_attempts_intact(app, start_worker, batch_size):
    job = enqueue.create_job(JobSpec("sample.snoozy", {"times": 3}, max_attempts=2)).job
    start_worker(JOB_HANDLER_MODULES=MODULES, JOB_WORKER_BATCH_SIZE=batch_size)
    done = wait_for_status(job.id, "succeeded", "failed", timeout=60)
    assert done.status == "succeeded", done.last_error
    assert (done.attempts, done.snoozes, done.max_attempts) == (4, 3, 5)
    assert done.result == {"attempt": 4, "snoozes": 3, "max_attempts": 5}
    types = event_types(job.id)
    assert types.count("snoozed") == 3 and types.count("claimed") == 4 and types[-1] == "succeeded"
    assert types.count("progress") == 3  # each snooze wrote its attempt's report before it


@MODES
def test_past_the_cap_a_snoozing_job_fails_saying_so(app, start_worker, batch_size):
    job = enqueue.create_job(JobSpec("sample.snoozy", {"times": 10})).job
    start_worker(JOB_HANDLER_MODULES=MODULES, JOB_WORKER_BATCH_SIZE=batch_size, JOB_MAX_SNOOZES="2")
    failed = wait_for_status(job.id, "failed", "succeeded", timeout=60)
    assert failed.status == "failed" and failed.snoozes == 2
    assert "JOB_MAX_SNOOZES" in failed.last_error and "snoozed 2 times" in failed.last_error
    assert event_types(job.id).count("snoozed") == 2
