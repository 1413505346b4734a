"""Batch claims: one statement, the reference's order, and each job fenced on its own."""

from __future__ import annotations

from dashboard.store import lifecycle
from tests.support.factories import make_job

from .helpers import LEASE, T0, at, fresh


def test_batch_claim_gives_each_job_to_its_own_worker_in_priority_order(app):
    low = make_job(priority=10, now=T0)
    high = make_job(priority=90, now=T0, attempts=1)
    mid = make_job(priority=50, now=T0)
    jobs = lifecycle.claim_batch(["w-a", "w-b"], lease_seconds=LEASE, now=at(1))
    assert [j.id for j in jobs] == [high.id, mid.id]
    assert sorted(j.locked_by for j in jobs) == ["w-a", "w-b"]
    assert {j.id: j.attempts for j in jobs} == {high.id: 2, mid.id: 1}
    assert fresh(low.id).status == "queued"
    for job in jobs:
        event = [e for e in service_events(job.id) if e.type == "claimed"][-1]
        assert event.worker_id == job.locked_by and event.attempt == job.attempts


def test_each_job_of_a_batch_is_fenced_separately(app):
    make_job(now=T0)
    make_job(now=T0)
    first, second = lifecycle.claim_batch(["w-a", "w-b"], lease_seconds=LEASE, now=at(1))
    # a batch sibling cannot settle a job it was not given
    assert lifecycle.complete_job(first.id, second.locked_by, first.attempts, now=at(2)) is None
    assert lifecycle.complete_job(first.id, first.locked_by, first.attempts, now=at(2)) is not None
    assert fresh(second.id).status == "running"
    # one job's lease expiring does not touch the other's
    lifecycle.renew_lease(second.id, second.locked_by, second.attempts, lease_seconds=LEASE, now=at(20))
    assert fresh(second.id).locked_until == at(20 + LEASE)


def test_batch_claim_takes_fewer_when_fewer_are_eligible(app):
    make_job(now=T0)
    assert len(lifecycle.claim_batch(["a", "b", "c"], lease_seconds=LEASE, now=at(1))) == 1
    assert lifecycle.claim_batch([], lease_seconds=LEASE, now=at(1)) == []


def service_events(job_id):
    from dashboard.store.reads import jobs as read_jobs

    return read_jobs.job_events(job_id)


def test_grouped_completion_fences_each_job(app):
    for _ in range(3):
        make_job(now=T0)
    a, b, c = lifecycle.claim_batch(["w-a", "w-b", "w-c"], lease_seconds=LEASE, now=at(1))
    done = lifecycle.complete_jobs(
        [
            (a.id, "w-a", a.attempts, {"n": 1}),
            (b.id, "w-c", b.attempts, {"stolen": True}),  # not b's owner
            (c.id, "w-c", c.attempts + 1, None),  # not c's attempt
        ],
        now=at(2),
    )
    assert done == {a.id}
    assert fresh(a.id).status == "succeeded" and fresh(a.id).result == {"n": 1}
    assert fresh(b.id).status == "running" and fresh(c.id).status == "running"
    assert [e.type for e in service_events(a.id)][-1] == "succeeded"
    assert [e.type for e in service_events(b.id)][-1] == "claimed"
    assert lifecycle.complete_jobs([]) == set()
