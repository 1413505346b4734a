"""Complete, fail with backoff, renew, progress, cleanup, retry, and ownership fencing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dashboard.store import lifecycle
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs

from .helpers import BACKOFF, LEASE, T0, at, claim, cleanup, event_types, fail, fresh


@pytest.fixture
def running(app):
    enqueue.create_job(enqueue.JobSpec("demo.success", {"x": 1}), now=T0)
    job = claim("owner", now=T0)
    assert job is not None
    return job


def test_complete_by_owner(running):
    done = lifecycle.complete_job(running.id, "owner", 1, {"answer": 42}, now=at(2))
    assert done is not None
    assert done.status == "succeeded"
    assert done.result == {"answer": 42}
    assert done.finished_at == at(2)
    assert done.locked_by is None and done.locked_until is None
    assert event_types(running.id) == ["created", "claimed", "succeeded"]


def test_failure_schedules_retry_with_exponential_backoff(app):
    enqueue.create_job(enqueue.JobSpec("demo.fail", max_attempts=4), now=T0)
    now = T0
    expected_delays = [5, 10, 20]
    for attempt, delay in enumerate(expected_delays, start=1):
        job = claim("w", now=now)
        assert job is not None and job.attempts == attempt
        after = fail(job, "w", f"error {attempt}", now=now)
        assert after is not None
        assert after.status == "queued"
        assert after.available_at == now + timedelta(seconds=delay)
        assert after.last_error == f"error {attempt}"
        assert after.locked_by is None and after.finished_at is None
        assert claim("w", now=now + timedelta(seconds=delay - 0.001)) is None
        now = now + timedelta(seconds=delay)
    event = read_jobs.job_events(job.id)[-1]
    assert event.type == "retry_scheduled"
    assert event.data["retry_in_seconds"] == 20
    assert event.data["error"] == "error 3"


def test_exhausted_attempts_become_failed(app):
    enqueue.create_job(enqueue.JobSpec("demo.fail", max_attempts=2), now=T0)
    job = claim("w", now=T0)
    fail(job, "w", "first", now=T0)
    job = claim("w", now=at(5))
    final = fail(job, "w", "second", now=at(6))
    assert final is not None
    assert final.status == "failed"
    assert final.attempts == 2
    assert final.finished_at == at(6)
    assert final.last_error == "second"
    assert event_types(job.id) == [
        "created",
        "claimed",
        "retry_scheduled",
        "claimed",
        "failed",
    ]
    assert claim("w", now=at(1000)) is None


def test_failure_data_is_kept_on_the_event(running):
    lifecycle.fail_job(
        running.id,
        "owner",
        1,
        "ValueError: bad",
        event_data={"traceback": "Traceback..."},
        now=at(1),
        **BACKOFF,
    )
    event = read_jobs.job_events(running.id)[-1]
    assert event.data["traceback"] == "Traceback..." and event.message == "ValueError: bad"


def test_nul_bytes_in_an_error_do_not_make_the_failure_unrecordable(running):
    after = fail(running, "owner", "bad\x00byte", now=at(1))
    assert after is not None and after.last_error == "bad\ufffdbyte"


def test_renew_by_owner_extends_the_lease(running):
    until = lifecycle.renew_lease(running.id, "owner", 1, lease_seconds=LEASE, now=at(20))
    assert until == at(20) + timedelta(seconds=LEASE)
    assert fresh(running.id).locked_until == until
    assert event_types(running.id)[-1] == "lease_renewed"


def test_progress_by_owner_is_recorded(running):
    event_id = lifecycle.record_progress(
        running.id, "owner", 1, message="half", data={"percent": 50}, now=at(1)
    )
    assert event_id is not None
    event = read_jobs.job_events(running.id)[-1]
    assert (event.id, event.type, event.data, event.attempt) == (event_id, "progress", {"percent": 50}, 1)


NON_OWNERS = {
    "other worker": ("intruder", 1),
    "wrong attempt": ("owner", 2),
    "earlier attempt": ("owner", 0),
}


@pytest.mark.parametrize(("worker", "attempt"), NON_OWNERS.values(), ids=NON_OWNERS.keys())
def test_non_owner_changes_nothing(running, worker, attempt):
    before = fresh(running.id)
    events_before = read_jobs.job_events(running.id)
    assert lifecycle.renew_lease(running.id, worker, attempt, lease_seconds=LEASE, now=at(1)) is None
    assert lifecycle.record_progress(running.id, worker, attempt, message="x", now=at(1)) is None
    assert lifecycle.complete_job(running.id, worker, attempt, {"stolen": True}, now=at(1)) is None
    assert lifecycle.fail_job(running.id, worker, attempt, "x", now=at(1), **BACKOFF) is None
    assert fresh(running.id) == before
    assert read_jobs.job_events(running.id) == events_before


def test_finished_job_cannot_be_touched_by_its_former_owner(running):
    lifecycle.complete_job(running.id, "owner", 1, None, now=at(1))
    assert lifecycle.renew_lease(running.id, "owner", 1, lease_seconds=LEASE, now=at(2)) is None
    assert fail(running, "owner", now=at(2)) is None
    assert fresh(running.id).status == "succeeded"


def test_stale_worker_scenario_step_by_step(app):
    enqueue.create_job(enqueue.JobSpec("demo.success", max_attempts=3), now=T0)
    # 1. Worker A claims job attempt 1.
    a = claim("worker-A", now=T0)
    assert a is not None and a.attempts == 1
    # 2-3. Worker A hangs; the lease expires.
    assert cleanup(now=at(LEASE - 1)).count == 0  # not yet expired
    # 4. Cleanup requeues the job (backoff for attempt 1: 5 s).
    result = cleanup(now=at(LEASE + 1))
    assert result.requeued == [a.id]
    requeued = fresh(a.id)
    assert requeued.status == "queued" and requeued.available_at == at(LEASE + 1 + 5)
    assert "worker-A" in requeued.last_error and "attempt 1" in requeued.last_error
    # 5. Worker B claims attempt 2.
    b = claim("worker-B", now=at(LEASE + 6))
    assert b is not None and b.id == a.id and b.attempts == 2
    # 6-7. Worker A wakes up: completing, failing, renewing attempt 1 all affect zero rows.
    assert lifecycle.complete_job(a.id, "worker-A", 1, {"stale": True}, now=at(40)) is None
    assert fail(a, "worker-A", now=at(40)) is None
    assert lifecycle.renew_lease(a.id, "worker-A", 1, lease_seconds=LEASE, now=at(40)) is None
    assert fresh(a.id).status == "running" and fresh(a.id).locked_by == "worker-B"
    # Worker B finishes normally.
    done = lifecycle.complete_job(a.id, "worker-B", 2, {"ok": True}, now=at(41))
    assert done is not None and done.result == {"ok": True}
    assert event_types(a.id) == ["created", "claimed", "timeout_requeued", "claimed", "succeeded"]


def test_cleanup_fails_a_job_whose_attempts_are_exhausted(app):
    enqueue.create_job(enqueue.JobSpec("demo.timeout", max_attempts=1), now=T0)
    job = claim("w", now=T0)
    result = cleanup(now=at(LEASE + 1))
    assert result.failed == [job.id] and result.requeued == []
    failed = fresh(job.id)
    assert failed.status == "failed" and failed.finished_at == at(LEASE + 1)
    assert failed.last_error.startswith("Lease expired at 2026-06-01T12:00:30")
    event = read_jobs.job_events(job.id)[-1]
    assert event.type == "failed" and event.data["expired_worker_id"] == "w"


def test_cleanup_uses_each_jobs_own_attempt_for_backoff(app):
    enqueue.create_job(enqueue.JobSpec("demo.timeout", max_attempts=5), now=T0)
    job = claim("w", now=T0)
    cleanup(now=at(31))
    job = claim("w", now=at(40))  # attempt 2
    assert job.attempts == 2
    cleanup(now=at(71))
    assert fresh(job.id).available_at == at(71 + 10)


def test_cleanup_is_batch_limited_and_leaves_live_leases_alone(app):
    for _ in range(5):
        enqueue.create_job(enqueue.JobSpec("demo.timeout"), now=T0)
    for _ in range(5):
        claim("w", now=T0)
    enqueue.create_job(enqueue.JobSpec("demo.success"), now=T0)
    live = claim("w2", now=at(20))
    first = cleanup(now=at(31), batch=3)
    second = cleanup(now=at(31), batch=3)
    third = cleanup(now=at(31), batch=3)
    assert (first.count, second.count, third.count) == (3, 2, 0)
    assert fresh(live.id).status == "running"


def test_renewed_lease_is_not_cleaned_up(running):
    lifecycle.renew_lease(running.id, "owner", 1, lease_seconds=LEASE, now=at(25))
    assert cleanup(now=at(40)).count == 0
    assert cleanup(now=at(56)).requeued == [running.id]


def test_expired_but_unrecovered_lease_still_belongs_to_its_worker(running):
    done = lifecycle.complete_job(running.id, "owner", 1, "late but fine", now=at(LEASE + 10))
    assert done is not None and done.status == "succeeded"


def test_manual_retry_of_a_failed_job(app):
    enqueue.create_job(enqueue.JobSpec("demo.fail", max_attempts=1), now=T0)
    job = claim("w", now=T0)
    fail(job, "w", "fatal", now=at(1))
    result = actions.run_one("retry", job.id, event_data={"actor": "test"}, now=at(10))
    assert (result.action, result.changed, result.status) == ("retry", 1, "queued")
    retried = result.job
    assert retried is not None
    assert retried.status == "queued"
    assert retried.attempts == 0
    assert retried.available_at == at(10)
    assert retried.last_error == "" and retried.result is None and retried.finished_at is None
    assert retried.locked_by is None and retried.locked_until is None
    event = read_jobs.job_events(job.id)[-1]
    assert event.type == "manual_retry" and event.data == {"actor": "test"}
    again = claim("w", now=at(10))
    assert again is not None and again.attempts == 1


@pytest.mark.parametrize("status", ["queued", "running", "succeeded"])
def test_manual_retry_only_for_failed_jobs(app, status):
    from tests.support.factories import make_job

    job = make_job(status)
    result = actions.run_one("retry", job.id, now=at(1))
    assert result.changed == 0 and result.status == status and result.job == job
    assert fresh(job.id) == job
    assert read_jobs.job_events(job.id) == []


def test_manual_retry_of_unknown_job(app):
    import uuid

    result = actions.run_one("retry", uuid.uuid4(), now=at(1))
    assert result.changed == 0 and result.status is None and result.job is None
