"""The real ``flask --app wsgi worker`` following jobs through every path."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from dashboard.store.lifecycle import create as enqueue
from tests.support.worker_loop import event_types, events, instant, job, wait_for_status
from tests.support.worker_mode import batch_mode

pytestmark = pytest.mark.process


def test_success_runs_the_handler_and_writes_its_events_in_order(app, start_worker):
    created = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0.2})).job
    worker = start_worker()

    done = wait_for_status(created.id, "succeeded")

    assert done.attempts == 1 and done.last_error == ""
    assert done.result == {"ok": True, "slept_seconds": 0.2, "attempt": 1}
    # The two reports coalesce into one, written with the success; with most of the lease
    # left, the handler's renewal is not sent.
    assert event_types(created.id) == ["created", "claimed", "progress", "succeeded"]
    timeline = events(created.id)
    worker_id = timeline[1].worker_id
    # a thread's id (host:pid:thread-N:random), or in batch mode one of its lanes', numbered
    # after the threads: 2 threads, so from thread-5
    kind = r"thread-([5-9]|[1-9]\d+)" if batch_mode() else "thread-[12]"
    assert re.fullmatch(rf"[^:]+:{worker.proc.pid}:{kind}:[0-9a-f]{{8}}", worker_id)
    assert {e.worker_id for e in timeline[1:]} == {worker_id}
    assert [e.data.get("percent") for e in timeline if e.type == "progress"] == [100.0]
    output = worker.wait_for_output(f"job {created.id} (demo.success) attempt 1/3 succeeded")
    assert "worker starting" in output and "JOB_WORKER_LEASE_SECONDS=2.0" in output


def test_failure_is_retried_with_the_exact_backoff_then_fails_for_good(app, start_worker):
    created = enqueue.create_job(enqueue.JobSpec("demo.fail", {"error": "boom"}, max_attempts=3)).job
    worker = start_worker()

    failed = wait_for_status(created.id, "failed")

    assert failed.attempts == 3
    assert failed.last_error == "DemoError: boom"
    assert failed.finished_at is not None and failed.locked_by is None
    assert event_types(created.id) == ["created"] + ["claimed", "progress", "retry_scheduled"] * 2 + [
        "claimed",
        "progress",
        "failed",
    ]
    timeline = events(created.id)
    retries = [e for e in timeline if e.type == "retry_scheduled"]
    assert [(e.attempt, e.data["retry_in_seconds"]) for e in retries] == [(1, 0.2), (2, 0.4)]
    claims = [e for e in timeline if e.type == "claimed"]
    for retry, next_claim in zip(retries, claims[1:], strict=True):
        retry_at = retry.created_at + timedelta(seconds=retry.data["retry_in_seconds"])
        assert retry.message == "DemoError: boom"
        assert instant(retry.data["retry_at"]) == retry_at
        assert next_claim.created_at >= retry_at
    final = timeline[-1]
    assert final.attempt == 3 and final.message == "DemoError: boom"
    assert final.data["exception_type"] == "DemoError"
    assert "raise DemoError(error)" in final.data["traceback"]
    assert final.data["traceback"].rstrip().endswith("DemoError: boom")
    worker.wait_for_output(f"job {created.id} (demo.fail) attempt 3/3 failed for good")
    assert f"job {created.id} (demo.fail) attempt 1/3 failed" in worker.output


def test_flaky_job_succeeds_on_the_configured_attempt(app, start_worker):
    created = enqueue.create_job(enqueue.JobSpec("demo.flaky", {"fail_until_attempt": 3}, max_attempts=3)).job
    start_worker()

    done = wait_for_status(created.id, "succeeded", "failed")

    assert done.status == "succeeded" and done.attempts == 3
    assert done.result == {"ok": True, "attempt": 3}
    timeline = events(created.id)
    assert [(e.type, e.attempt) for e in timeline if e.type in {"retry_scheduled", "succeeded"}] == [
        ("retry_scheduled", 1),
        ("retry_scheduled", 2),
        ("succeeded", 3),
    ]
    assert timeline[3].message == "DemoError: Flaky failure on attempt 1; succeeds on attempt 3"


def test_timeout_is_requeued_by_cleanup_and_the_stale_attempt_cannot_complete(app, start_worker):
    # Lease 1 s, handler sleeps 2.5 s without renewing: cleanup (another thread) requeues
    # attempt 1, attempt 2 runs and expires too; when each sleeper wakes, its completion
    # must match nothing.
    created = enqueue.create_job(enqueue.JobSpec("demo.timeout", {"sleep_seconds": 2.5}, max_attempts=2)).job
    worker = start_worker(JOB_WORKER_LEASE_SECONDS="1", JOB_WORKER_BACKOFF_BASE_SECONDS="0.1")

    failed = wait_for_status(created.id, "failed")
    worker.wait_for_output(f"job {created.id} (demo.timeout) attempt 1/2 ended", timeout=15)
    worker.wait_for_output(f"job {created.id} (demo.timeout) attempt 2/2 ended", timeout=15)

    assert failed.attempts == 2 and failed.result is None
    assert failed.last_error.startswith("Lease expired at ")
    assert "attempt 2)" in failed.last_error
    # Each attempt's progress report was still pending (no timer flush in these tests) when
    # the attempt was lost, so it was never written: a lost attempt writes no progress.
    assert [(e.type, e.attempt) for e in events(created.id)] == [
        ("created", 0),
        ("claimed", 1),
        ("timeout_requeued", 1),
        ("claimed", 2),
        ("failed", 2),
    ]
    requeued = events(created.id)[2]
    assert requeued.data["expired_worker_id"] == events(created.id)[1].worker_id
    assert "no longer ours" in worker.output
    after = job(created.id)
    assert after.status == "failed" and after.updated_at == failed.updated_at


def test_slow_job_renews_its_lease_and_outlives_it(app, start_worker):
    created = enqueue.create_job(enqueue.JobSpec("demo.slow", {"sleep_seconds": 2.5})).job
    start_worker(JOB_WORKER_LEASE_SECONDS="1")

    done = wait_for_status(created.id, "succeeded", "failed")

    assert done.status == "succeeded" and done.attempts == 1
    timeline = events(created.id)
    types = [e.type for e in timeline]
    assert "timeout_requeued" not in types and "retry_scheduled" not in types
    assert types.count("lease_renewed") >= 3
    first_lease = instant(timeline[1].data["locked_until"])
    assert done.finished_at > first_lease  # it ran past the lease it was claimed with


def test_user_handler_module_is_loaded_through_job_handler_modules(app, start_worker):
    created = enqueue.create_job(enqueue.JobSpec("sample.echo", {"x": [1, 2]})).job
    worker = start_worker(JOB_HANDLER_MODULES="tests.runtime.sample_handlers")

    done = wait_for_status(created.id, "succeeded", "failed")

    assert done.status == "succeeded", done.last_error
    assert done.result["echo"] == {"x": [1, 2]}
    assert done.result["pid"] == worker.proc.pid
    assert done.result["worker_id"] == events(created.id)[1].worker_id
    assert "sample.echo" in worker.output.split("job types:")[1]


def test_command_line_options_override_the_environment(app, start_worker):
    worker = start_worker(
        "--threads", "3", "--lease-seconds", "7.5", "--log-level", "debug", JOB_WORKER_THREADS="1"
    )
    output = worker.wait_for_output(":thread-3:")
    assert "JOB_WORKER_THREADS=3" in output
    assert "JOB_WORKER_LEASE_SECONDS=7.5" in output
    assert "JOB_WORKER_LOG_LEVEL=DEBUG" in output
    assert "database: postgresql+psycopg://" in output
    worker.wait_for_output("nothing to claim")
    created = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job
    wait_for_status(created.id, "succeeded")
    claimed = events(created.id)[1]
    assert claimed.data["locked_until"]  # lease set from the option
    lease = instant(claimed.data["locked_until"]) - claimed.created_at
    assert lease == timedelta(seconds=7.5)
    worker.wait_for_output(f"claimed job {created.id}")
    worker.wait_for_output(f"executing job {created.id}")


def test_more_threads_than_the_pool_can_serve_is_refused_with_advice(app, start_worker):
    worker = start_worker("--threads", "200")
    assert worker.wait(30) == 2
    assert "set JOB_WORKER_THREADS=200" in worker.output


def test_a_worker_needs_no_sign_in_settings_in_production(app, start_worker):
    """``DEBUG=false`` without a secret key or credentials refuses to serve, but a
    worker host serves nothing: the worker runs jobs and only logs the refusal."""
    created = enqueue.create_job(enqueue.JobSpec("demo.success")).job
    worker = start_worker(SECRET_KEY="")
    wait_for_status(created.id, "succeeded")
    assert "Refusing to serve with DEBUG=false" in worker.output
