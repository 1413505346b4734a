"""Snoozing an attempt: queued again later, not counted against max_attempts, fenced like
every settle (a stale worker changes nothing), capped, and given back by a manual retry."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import lifecycle
from dashboard.store.flow import queues
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs

from .helpers import BACKOFF, T0, at, claim, event_types, fail, fresh

CAP = 100
CAP_ERROR = "Snooze: over the cap"


def snooze(job, worker, seconds=60.0, now=T0, max_snoozes=CAP, **kwargs):
    return lifecycle.snooze_job(
        job.id, worker, job.attempts, seconds, max_snoozes=max_snoozes, cap_error=CAP_ERROR, now=now, **kwargs
    )


@pytest.fixture
def running(app):
    enqueue.create_job(enqueue.JobSpec("demo.success", max_attempts=2), now=T0)
    job = claim("owner", now=T0)
    assert job is not None and job.attempts == 1
    return job


def test_snooze_requeues_later_without_spending_the_attempt(running):
    after = snooze(running, "owner", 90, now=at(1), message="Snoozed for 90s")
    assert after is not None and after.status == "queued"
    assert after.available_at == at(91) and after.locked_by is None and after.last_error == ""
    assert after.attempts == 1  # never taken back: the fence rides on it
    assert after.snoozes == 1 and after.max_attempts == 3  # the budget left is still 2 attempts
    assert event_types(running.id) == ["created", "claimed", "snoozed"]
    event = read_jobs.job_events(running.id)[-1]
    assert event.attempt == 1 and event.message == "Snoozed for 90s" and event.worker_id == "owner"
    assert event.data["snooze_seconds"] == 90 and event.data["snoozes"] == 1
    assert event.data["type"] == "demo.success" and "run_ms" in event.data
    assert claim("w", now=at(90.9)) is None  # not due before its time
    again = claim("w", now=at(91))
    assert again is not None and again.id == running.id and again.attempts == 2


def test_snoozes_do_not_count_against_max_attempts(running):
    job, now = running, T0
    for n in range(1, 6):  # five snoozes on a job of max_attempts 2
        assert snooze(job, "owner", 0, now=now) is not None
        job = claim("owner", now=now)
        assert job is not None and job.attempts == n + 1 and job.snoozes == n
    first = lifecycle.fail_job(job.id, "owner", job.attempts, "boom", now=now, snoozes=job.snoozes, **BACKOFF)
    assert first is not None and first.status == "queued"  # its first counted attempt failed
    assert first.available_at == now + timedelta(seconds=BACKOFF["backoff_base_seconds"])  # no 2**5
    job = claim("owner", now=first.available_at)
    last = fail(job, "owner", "boom again", now=first.available_at)
    assert last is not None and last.status == "failed"
    assert (last.attempts, last.snoozes, last.max_attempts) == (7, 5, 7)  # 2 of 2 spent


def test_a_stale_worker_cannot_settle_an_attempt_that_snoozed_and_was_claimed_again(running):
    assert snooze(running, "owner", 0, now=at(1)) is not None
    # Claimed again by the same worker id: only the attempt number tells the two apart, so a
    # snooze that took the attempt back would let the stale settles below through.
    current = claim("owner", now=at(1))
    assert current is not None and current.attempts == 2 and current.locked_by == "owner"
    before = fresh(running.id)
    events = event_types(running.id)
    stale = running  # attempt 1
    assert lifecycle.complete_job(stale.id, "owner", 1, {"late": True}, now=at(2)) is None
    assert fail(stale, "owner", "late failure", now=at(2)) is None
    assert snooze(stale, "owner", 5, now=at(2)) is None
    completed, _ = lifecycle.complete_and_claim(stale.id, "owner", 1, None, lease_seconds=30, now=at(2))
    assert not completed
    assert lifecycle.renew_lease(stale.id, "owner", 1, lease_seconds=30, now=at(2)) is None
    assert fresh(running.id) == before and event_types(running.id) == events
    done = lifecycle.complete_job(current.id, "owner", 2, {"ok": True}, now=at(3))
    assert done is not None and done.status == "succeeded"


def test_another_worker_that_lost_the_attempt_cannot_snooze_it(running):
    lifecycle.rescue_expired_jobs("cleaner", batch_size=10, now=at(31), **BACKOFF)
    taken = claim("other", now=at(60))
    assert taken is not None and taken.attempts == 2
    assert snooze(running, "owner", 0, now=at(61)) is None
    now = fresh(running.id)
    assert now.status == "running" and now.locked_by == "other" and now.snoozes == 0


def test_past_the_cap_the_job_fails_with_a_clear_error(running):
    job = running
    for _ in range(2):
        assert snooze(job, "owner", 0, max_snoozes=2) is not None
        job = claim("owner")
    failed = snooze(job, "owner", 0, max_snoozes=2)
    assert failed is not None and failed.status == "failed"
    assert failed.last_error == CAP_ERROR and failed.finished_at == T0 and failed.snoozes == 2
    event = read_jobs.job_events(running.id)[-1]
    assert event.type == "failed" and event.message == CAP_ERROR and event.data["error"] == CAP_ERROR
    assert event_types(running.id).count("snoozed") == 2


def test_a_manual_retry_gives_back_the_snoozes(running):
    job = running
    for _ in range(3):
        snooze(job, "owner", 0)
        job = claim("owner")
    fail(job, "owner", "x")
    job = claim("owner", now=at(60))
    failed = fail(job, "owner", "y", now=at(60))
    assert failed is not None and failed.status == "failed" and failed.max_attempts == 5
    assert actions.run_one("retry", running.id, now=at(100)).changed
    retried = fresh(running.id)
    assert (retried.status, retried.attempts, retried.snoozes, retried.max_attempts) == ("queued", 0, 0, 2)


def test_pending_progress_is_written_before_the_snooze(running):
    report = lifecycle.progress_report("half way", {"percent": 50}, now=at(1))
    snooze(running, "owner", 10, now=at(2), progress=[report])
    assert event_types(running.id)[-2:] == ["progress", "snoozed"]


def test_a_snooze_frees_its_concurrency_slot(app):
    queues.set_limits("partner", concurrency_limit=1, now=T0)
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="partner"), now=T0)
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="partner"), now=T0)
    first = claim("w1")
    assert first is not None and claim("w2") is None  # the one slot is held
    snooze(first, "w1", 60)
    second = claim("w2")
    assert second is not None and second.id != first.id
    with db.engine.connect() as conn:
        held = (
            conn.execute(text("SELECT job_id FROM jobs_queue_slot WHERE queue = 'partner'")).scalars().all()
        )
    assert held == [second.id]


def test_a_negative_snooze_is_refused_naming_seconds(running):
    with pytest.raises(ValueError, match="seconds"):
        snooze(running, "owner", -1)
    assert fresh(running.id).status == "running"
