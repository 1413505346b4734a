"""Claiming: eligibility, order, and exactly-once under concurrency."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

from flask import Flask

from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue
from tests.support.factories import make_job

from .helpers import LEASE, T0, at, claim, event_types, fresh


def test_successful_claim_sets_owner_lease_attempt_and_event(app):
    created = enqueue.create_job(enqueue.JobSpec("demo.success", {"n": 1}), now=T0).job
    job = claim("w1", now=at(1))
    assert job is not None and job.id == created.id
    assert job.status == "running"
    assert job.attempts == 1
    assert job.locked_by == "w1"
    assert job.locked_until == at(1) + timedelta(seconds=LEASE)
    assert job.last_error == "" and job.result is None
    assert event_types(job.id) == ["created", "claimed"]
    claimed = fresh(job.id)
    assert claimed == job


def test_nothing_to_claim_returns_none(app):
    assert claim("w1") is None


def test_claim_clears_the_previous_attempts_error(app):
    make_job("queued", attempts=1, last_error="earlier failure", available_at=T0)
    job = claim("w1", now=at(1))
    assert job is not None and job.last_error == "" and job.attempts == 2


def test_priority_then_available_at_then_created_at_order(app):
    low = make_job(priority=10, available_at=at(-30), created_at=at(-30))
    high_late = make_job(priority=90, available_at=at(-5), created_at=at(-50))
    high_early = make_job(priority=90, available_at=at(-10), created_at=at(-1))
    mid_a = make_job(priority=50, available_at=at(-20), created_at=at(-20))
    mid_b = make_job(priority=50, available_at=at(-20), created_at=at(-10))
    order = [claim("w", now=T0).id for _ in range(5)]
    assert order == [high_early.id, high_late.id, mid_a.id, mid_b.id, low.id]


def test_future_jobs_are_not_claimed_until_available(app):
    delayed = enqueue.create_job(enqueue.JobSpec("demo.success", available_at=at(60)), now=T0).job
    assert claim("w", now=at(59)) is None
    job = claim("w", now=at(60))
    assert job is not None and job.id == delayed.id


def test_only_queued_jobs_with_attempts_left_are_eligible(app):
    make_job("running")
    make_job("succeeded")
    make_job("failed")
    make_job("queued", attempts=3, max_attempts=3, now=T0)
    assert claim("w", now=at(1)) is None


def test_batch_claim_takes_jobs_in_order_each_with_its_own_attempt(app):
    a = make_job(priority=1, now=T0)
    b = make_job(priority=3, attempts=1, now=T0)
    c = make_job(priority=2, now=T0)
    jobs = lifecycle.claim_jobs("w", lease_seconds=LEASE, limit=2, now=at(1))
    assert [j.id for j in jobs] == [b.id, c.id]
    assert [j.attempts for j in jobs] == [2, 1]
    assert fresh(a.id).status == "queued"


def test_many_threads_claim_each_job_exactly_once(app: Flask):
    jobs = 600
    threads = 10
    for i in range(jobs):
        enqueue.create_job(enqueue.JobSpec("demo.success", {"i": i}), now=T0)
    claimed: list[tuple[str, object]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def run(n: int) -> None:
        try:
            with app.app_context():
                start.wait()
                while (job := claim(f"w{n}", now=at(1))) is not None:
                    with lock:
                        claimed.append((f"w{n}", job.id))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert errors == []
    counts = Counter(job_id for _, job_id in claimed)
    assert len(counts) == jobs
    assert set(counts.values()) == {1}
    assert len({w for w, _ in claimed}) > 1  # the work really was shared
    from dashboard.store.reads import jobs as read_jobs
    from dashboard.store.reads import stats as read_stats

    stats = read_stats.stats(at(1))
    assert stats.by_status["running"] == jobs and stats.by_status["queued"] == 0
    assert read_jobs.list_events(limit=1, type="claimed").results[0].type == "claimed"
