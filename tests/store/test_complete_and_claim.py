"""One-job mode's settle-and-claim: a success and the next claim in one statement.

The two halves must behave exactly as ``complete_job`` and ``claim_next_job`` would one after
the other: the completion fenced by owner and attempt, the claim in the reference's order, each
with its own event, and neither depending on the other.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import lifecycle
from dashboard.store.lifecycle import claim_form
from tests.support.factories import make_job
from tests.support.waiting import wait_until

from .helpers import LEASE, T0, at, claim, cleanup, event_types, fresh, record_statements

FORMS = {  # the job's queue known and the only one served: its own form; else the served queues' visit
    "only queue": lifecycle.settle.COMPLETE_AND_CLAIM_ONLY_QUEUE,
    "visit": lifecycle.settle.COMPLETE_AND_CLAIM_NO_LIMITS,
}
CURRENT = {"form": "visit"}


@pytest.fixture(params=list(FORMS), autouse=True)
def form(request, monkeypatch):
    """Every test runs with both forms of a settle-and-claim without limits, and checks that
    the form it names is the one that ran."""
    claim_form.DEFAULT.forget()
    CURRENT["form"] = request.param
    sent = record_statements(monkeypatch)
    yield request.param
    settles = [
        s for s in sent if s not in (lifecycle.claim.CLAIM_ONE_NO_LIMITS, lifecycle.claim.CLAIM_NO_LIMITS)
    ]
    assert settles and set(settles) == {FORMS[request.param]}


def settle_and_claim(job, worker: str, now, result=None, attempt=None):
    return lifecycle.complete_and_claim(
        job.id,
        worker,
        job.attempts if attempt is None else attempt,
        result,
        lease_seconds=LEASE,
        now=now,
        job_queue=job.queue if CURRENT["form"] == "only queue" else None,
    )


def test_it_completes_the_attempt_and_claims_the_next_job_in_priority_order(app):
    make_job(now=T0)
    running = claim("w-1", now=at(1))
    low = make_job(priority=10, now=at(2))
    high = make_job(priority=90, now=at(3))
    completed, following = settle_and_claim(running, "w-1", at(4), result={"n": 1})
    assert completed is True
    done = fresh(running.id)
    assert (done.status, done.result, done.finished_at) == ("succeeded", {"n": 1}, at(4))
    assert done.locked_by is None
    assert event_types(running.id) == ["claimed", "succeeded"]
    assert following is not None and following.id == high.id
    assert (following.status, following.attempts, following.locked_by) == ("running", 1, "w-1")
    assert following.locked_until == at(4 + LEASE)
    assert fresh(high.id).locked_by == "w-1"
    assert event_types(high.id) == ["claimed"]
    assert fresh(low.id).status == "queued"


def test_a_fenced_off_completion_changes_nothing_and_the_claim_still_happens(app):
    make_job(now=T0)
    running = claim("w-1", now=at(1))
    waiting = make_job(now=at(2))
    completed, following = settle_and_claim(running, "w-1", at(3), attempt=running.attempts + 1)
    assert completed is False
    assert fresh(running.id).status == "running" and event_types(running.id) == ["claimed"]
    assert following is not None and following.id == waiting.id
    completed, nothing = settle_and_claim(running, "someone-else", at(4))
    assert completed is False and nothing is None
    assert fresh(running.id).status == "running"


def test_with_nothing_eligible_it_only_completes(app):
    make_job(now=T0)
    running = claim("w-1", now=at(1))
    later = make_job(now=at(2), available_at=at(600))
    completed, following = settle_and_claim(running, "w-1", at(3))
    assert completed is True and following is None
    assert fresh(running.id).status == "succeeded"
    assert fresh(later.id).status == "queued"


def test_the_job_just_completed_is_never_claimed_again(app):
    make_job(now=T0, max_attempts=3)
    running = claim("w-1", now=at(1))
    completed, following = settle_and_claim(running, "w-1", at(2))
    assert completed is True and following is None
    assert fresh(running.id).attempts == 1


def test_a_job_queued_again_by_lease_recovery_is_claimed_anew_and_never_settled_by_its_old_attempt(app):
    make_job(now=T0, max_attempts=3)
    running = claim("w-1", now=at(1))
    assert cleanup(at(2 + LEASE)).requeued == [running.id]
    after_backoff = at(LEASE + 400)
    completed, following = settle_and_claim(running, "w-1", after_backoff, result={"late": True})
    assert completed is False
    assert following is not None and following.id == running.id
    again = fresh(running.id)
    assert (again.status, again.attempts, again.locked_by, again.result) == ("running", 2, "w-1", None)
    assert event_types(running.id) == ["claimed", "timeout_requeued", "claimed"]


def test_it_waits_for_the_settled_job_before_it_holds_the_next_one(app):
    """A transaction holding the job being settled, then locking the job the settle would
    claim next (a create's ``lock_parents`` naming both as parents, a workflow's cancel),
    must not deadlock with the settle-and-claim: the statement locks the job it settles
    before it claims, so while it waits it holds nothing; the other transaction gets the next
    job, commits, and only then is the job settled and the next one claimed. Whatever plan
    the statement gets (on a table this small, one that reads the claim first)."""
    make_job(now=T0)
    running = claim("w-1", now=at(1))
    following = make_job(now=at(2))
    outcome: dict[str, object] = {}

    def settle() -> None:
        with app.app_context():
            try:
                outcome["settled"] = settle_and_claim(running, "w-1", at(3))
            except Exception as error:  # a deadlock, were the statement to claim first
                outcome["error"] = error

    def settle_waits() -> bool:
        with db.engine.connect() as conn:
            return bool(conn.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted")).scalar())

    with db.engine.connect() as holder:
        transaction = holder.begin()
        holder.execute(text("SELECT 1 FROM jobs_job WHERE id = :id FOR SHARE"), {"id": running.id})
        thread = threading.Thread(target=settle)
        thread.start()
        wait_until(settle_waits, 10, "the settle to wait for the held job")
        holder.execute(text("SET LOCAL lock_timeout = '5s'"))
        holder.execute(text("SELECT 1 FROM jobs_job WHERE id = :id FOR SHARE"), {"id": following.id})
        transaction.commit()
    thread.join(10)
    assert not thread.is_alive() and "error" not in outcome, outcome
    completed, claimed = outcome["settled"]  # type: ignore[misc]
    assert completed is True and claimed is not None and claimed.id == following.id
    assert fresh(running.id).status == "succeeded"
