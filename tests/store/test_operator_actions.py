"""An operator action takes one path: one statement per action, the same for one job
(``actions.run_one``) and for a bulk action's chunks (``actions.run``), one result type."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from tests.support.factories import make_job
from tests.support.waiting import wait_until

from .helpers import T0

ACTOR = {"actor": "olga"}
LATER = T0 + timedelta(hours=1)
STARTS = {"retry": "failed", "cancel": "queued", "run_now": "queued", "delete": "succeeded"}
CHANGING = ("status", "attempts", "available_at", "last_error", "finished_at", "cancelled_at", "updated_at")


def _job(action: str, type: str):
    if action == "run_now":
        return enqueue.create_job(enqueue.JobSpec(type, {}, available_at=LATER), now=T0).job
    return make_job(STARTS[action], type=type, now=T0)


def _shape(job_id):
    job = read_jobs.get_job(job_id)
    events = [
        (e.type, e.attempt, e.message, {k: v for k, v in e.data.items() if k not in ("bulk", "type")})
        for e in read_jobs.job_events(job_id)
    ]
    return (None if job is None else tuple(getattr(job, c) for c in CHANGING)), events


@pytest.mark.parametrize("action", ["retry", "cancel", "run_now", "delete"])
def test_one_job_and_a_bulk_action_change_a_job_the_same_way(app, action):
    one, many = _job(action, "one.kind"), _job(action, "many.kind")
    single = actions.run_one(action, one.id, event_data=ACTOR, now=T0)
    bulk = actions.run(action, actions.Selection(type="many.kind"), event_data=ACTOR, now=T0)
    assert isinstance(single, actions.ActionResult) and isinstance(bulk, actions.ActionResult)
    assert (single.action, single.changed, bulk.action, bulk.changed) == (action, 1, action, 1)
    assert _shape(one.id) == _shape(many.id)
    if action != "delete":
        assert single.job == read_jobs.get_job(one.id) and single.status == single.job.status
        assert {e.data.get("bulk") for e in read_jobs.job_events(many.id)[-1:]} == {True}
    else:
        assert (single.job, single.status) == (None, "succeeded")


def test_an_unknown_action_is_refused_by_name(app):
    job = make_job("failed")
    for call in (
        lambda: actions.run_one("explode", job.id),
        lambda: actions.run("explode", actions.Selection(), event_data=ACTOR),
        lambda: actions.count("explode", actions.Selection()),
    ):
        with pytest.raises(ValueError, match="action must be one of retry, cancel, run_now, delete"):
            call()
    assert read_jobs.get_job(job.id) == job


def test_run_now_leaves_alone_a_job_claimed_while_it_waits_for_the_row(app, libpq_url):
    """The statement reads the waiting job, then waits on the row a claim holds; once the claim
    commits the job is running, and run now must not touch it (its UPDATE repeats the fence)."""
    job = enqueue.create_job(enqueue.JobSpec("demo.success", {}, available_at=LATER), now=T0).job
    outcome: list[actions.ActionResult] = []
    with psycopg.connect(libpq_url) as claimer:
        claimer.execute(
            "UPDATE jobs_job SET status = 'running', attempts = 1, locked_by = 'w', "
            "locked_until = now() + interval '1 minute' WHERE id = %s",
            (job.id,),
        )
        thread = threading.Thread(target=lambda: outcome.append(_run_now(app, job.id)))
        thread.start()
        wait_until(lambda: _waiting_on_a_lock() == 1, timeout=10, message="run now waiting on the row")
        claimer.commit()
        thread.join(timeout=10)
    (result,) = outcome
    assert (result.changed, result.status) == (0, "running")
    after = read_jobs.get_job(job.id)
    assert after.available_at == LATER and [e.type for e in read_jobs.job_events(job.id)] == ["created"]


def _run_now(app, job_id) -> actions.ActionResult:
    with app.app_context():
        return actions.run_one("run_now", job_id, event_data=ACTOR, now=T0)


def _waiting_on_a_lock() -> int:
    """Sessions waiting on a lock in the run-now statement (a fresh read each time: a
    transaction sees one snapshot of pg_stat_activity)."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE :run_now"
    )
    with db.engine.connect() as conn:
        return conn.execute(query, {"run_now": "%WITH waiting AS%"}).scalar_one()
