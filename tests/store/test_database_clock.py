"""Leases are measured on the database's clock, from when the statement runs.

A worker-side statement without ``now=`` takes its time from PostgreSQL
(``statement_timestamp()``, see ``store/lifecycle/claim.sql``), not from the worker. The worker's clock
is moved here (``lifecycle.utcnow``) to stand for a claim that spent longer in the network than its lease
(a partition), or for a host whose clock is off: the lease still starts when the claim or the
renewal takes effect, and the rescue judges it on the same clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import lifecycle, values
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs

from .helpers import BACKOFF, LEASE, event_types, fresh

LATE = timedelta(seconds=60)  # twice the lease: a lease computed by the worker would be over


def database_now() -> datetime:
    with db.engine.connect() as conn:
        return conn.execute(text("SELECT statement_timestamp()")).scalar_one()


@pytest.fixture
def worker_clock(monkeypatch):
    """``worker_clock(offset)``: from then on the worker's clock reads ``offset`` off."""
    real = values.utcnow

    def move(offset: timedelta) -> None:
        monkeypatch.setattr(lifecycle, "utcnow", lambda: real() + offset)

    return move


def due_job(**payload: int):
    """A job due two minutes ago, so a claim finds it whatever the worker's clock says."""
    return enqueue.create_job(
        enqueue.JobSpec("demo.success", payload, available_at=database_now() - 2 * LATE)
    ).job


def test_a_claim_holds_a_full_lease_from_when_it_runs(app, worker_clock):
    worker_clock(-LATE)  # what a claim sent a minute before it ran saw
    created = due_job()
    before = database_now()
    job = lifecycle.claim_next_job("w1", lease_seconds=LEASE)
    after = database_now()
    assert job is not None and job.id == created.id
    assert before + timedelta(seconds=LEASE) <= job.locked_until <= after + timedelta(seconds=LEASE)
    claimed = next(e for e in read_jobs.job_events(job.id) if e.type == "claimed")
    assert before <= claimed.created_at <= after  # the event carries the same clock
    assert datetime.fromisoformat(claimed.data["locked_until"]) == job.locked_until


def test_a_batch_claim_and_a_settle_and_claim_measure_leases_the_same_way(app, worker_clock):
    worker_clock(-LATE)
    for n in range(3):
        due_job(n=n)
    before = database_now()
    first, second = lifecycle.claim_batch(["w-a", "w-b"], lease_seconds=LEASE)
    assert first.locked_until >= before + timedelta(seconds=LEASE)
    assert second.locked_until >= before + timedelta(seconds=LEASE)
    before = database_now()
    done, following = lifecycle.complete_and_claim(first.id, "w-a", 1, "ok", lease_seconds=LEASE)
    assert done and following is not None
    assert following.locked_until >= before + timedelta(seconds=LEASE)
    assert fresh(first.id).finished_at >= before


def test_a_renewal_extends_the_lease_from_when_it_runs(app, worker_clock):
    due_job()
    job = lifecycle.claim_next_job("w1", lease_seconds=LEASE)
    assert job is not None
    worker_clock(-LATE)
    before = database_now()
    until = lifecycle.renew_lease(job.id, "w1", 1, lease_seconds=LEASE)
    assert until is not None and until >= before + timedelta(seconds=LEASE)
    assert fresh(job.id).locked_until == until


def test_lease_recovery_judges_expiry_on_the_database_clock(app, worker_clock):
    """A rescuer whose clock runs a minute ahead leaves a fresh lease alone."""
    due_job()
    job = lifecycle.claim_next_job("w1", lease_seconds=LEASE)
    assert job is not None
    worker_clock(LATE)
    recovered = lifecycle.rescue_expired_jobs("rescuer", batch_size=10, **BACKOFF)
    assert recovered.count == 0
    assert fresh(job.id).status == "running"
    assert event_types(job.id) == ["created", "claimed"]


def test_a_failed_attempts_backoff_counts_from_the_database_clock(app, worker_clock):
    due_job()
    job = lifecycle.claim_next_job("w1", lease_seconds=LEASE)
    assert job is not None
    worker_clock(-LATE)
    before = database_now()
    failed = lifecycle.fail_job(job.id, "w1", 1, "boom", **BACKOFF)
    assert failed is not None and failed.status == "queued"
    assert failed.available_at >= before + timedelta(seconds=BACKOFF["backoff_base_seconds"])


def test_a_given_now_still_sets_the_time(app):
    """Tests move the clock with ``now=``: it wins over the database's."""
    enqueue.create_job(
        enqueue.JobSpec("demo.success"), now=datetime(2026, 1, 1, tzinfo=database_now().tzinfo)
    )
    at = datetime(2026, 1, 1, 0, 1, tzinfo=database_now().tzinfo)
    job = lifecycle.claim_next_job("w1", lease_seconds=LEASE, now=at)
    assert job is not None and job.locked_until == at + timedelta(seconds=LEASE)
