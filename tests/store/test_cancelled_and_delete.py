"""A cancelled job is failed (the four states) with ``cancelled_at``, counted and listed apart;
a bulk retry leaves it out unless asked; finished jobs are deleted with their events and an
audit row each."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from dashboard.extensions import db
from dashboard.store import audit, lifecycle, values
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.actions import Selection
from dashboard.store.reads import health as read_health
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.reads import overview as read_overview
from dashboard.store.reads import stats as read_stats
from dashboard.store.reads.stats import StatsPolicy
from dashboard.store.reads.stats_refresh import refresh_finished_counts
from tests.support.factories import make_job

from .helpers import T0

ACTOR = {"actor": "olga", "role": "operator", "source": "dashboard"}


def _cancelled() -> tuple:
    job = enqueue.create_job(enqueue.JobSpec("mail.send", {}), now=T0).job
    outcome = actions.run_one("cancel", job.id, event_data=ACTOR)
    assert outcome.changed and outcome.status == "failed"
    return job, read_jobs.get_job(job.id)


def test_cancel_marks_the_job_and_retry_clears_the_mark(app):
    job, cancelled = _cancelled()
    assert cancelled.status == "failed" and cancelled.cancelled_at is not None
    assert cancelled.last_error == "Cancelled by olga"
    retried = actions.run_one("retry", job.id)
    assert retried.job is not None and retried.job.status == "queued" and retried.job.cancelled_at is None


def test_the_database_keeps_the_mark_on_failed_jobs_only(app):
    job = make_job("queued")
    with pytest.raises(IntegrityError, match="job_cancelled_shape"), db.engine.begin() as conn:
        conn.execute(text("UPDATE jobs_job SET cancelled_at = now() WHERE id = :id"), {"id": job.id})


def test_counts_figures_and_failures_leave_cancels_out(app):
    now = values.utcnow()
    _cancelled()
    failure = make_job("failed", type="mail.send", finished_at=now)
    stats = read_stats.stats(now)
    assert stats.by_status["failed"] == 2  # the stored statuses, as the reference's stats
    assert (stats.cancelled, stats.failures) == (1, 1)
    totals = read_health.finished_totals(now)
    assert (totals.failed, totals.cancelled, totals.counted_at) == (1, 1, None)
    row = next(r for r in read_overview.queue_detail(now).types if r.type == "mail.send")
    assert row.failed_24h.value == 1  # "failed, 24 h": the failure, not the cancel
    enqueue.create_job(enqueue.JobSpec("demo.fail", {}), now=now)
    assert [f.job.id for f in read_stats.latest_failures()] == [failure.id]  # not the cancel
    assert failure.cancelled_at is None


def test_latest_failures_read_a_bounded_run_of_failed_jobs_cancels_included(app, monkeypatch):
    """Cancelled jobs are failed too: behind more cancels than the read's bound, an older
    failure is left unread rather than found by a long walk."""
    now = values.utcnow()
    failure = make_job("failed", type="mail.send", finished_at=now - timedelta(minutes=5))
    for _ in range(3):
        job = enqueue.create_job(enqueue.JobSpec("mail.send", {}), now=now).job
        assert actions.run_one("cancel", job.id, event_data=ACTOR).changed
    monkeypatch.setattr(read_stats, "FAILURES_SCANNED", 4)
    assert [f.job.id for f in read_stats.latest_failures()] == [failure.id]
    monkeypatch.setattr(read_stats, "FAILURES_SCANNED", 3)
    assert read_stats.latest_failures() == []


def test_cached_totals_count_cancels_apart(app):
    _cancelled()
    make_job("failed")
    make_job("succeeded")
    refresh_finished_counts()
    large = StatsPolicy(exact_below_rows=0, refresh_seconds=3600)  # every table "large"
    now = values.utcnow()
    totals = read_health.finished_totals(now, large)
    assert (totals.succeeded, totals.failed, totals.cancelled) == (1, 1, 1) and totals.counted_at
    stats = read_stats.stats(now, large)
    assert stats.by_status["failed"] == 2 and stats.cancelled == 1


def test_lists_filter_cancelled_jobs_in_and_out(app):
    _job, cancelled = _cancelled()
    failure = make_job("failed")
    ids = lambda **kw: [j.id for j in find_jobs.list_jobs(limit=10, offset=0, **kw).results]  # noqa: E731
    assert set(ids(status="failed")) == {cancelled.id, failure.id}
    assert ids(status="failed", cancelled=False) == [failure.id]
    assert ids(cancelled=True) == [cancelled.id]


def test_bulk_retry_leaves_cancelled_jobs_out_unless_asked(app):
    _job, cancelled = _cancelled()
    failure = make_job("failed")
    assert actions.count("retry", Selection()) == 1
    assert actions.count("retry", Selection(cancelled=True)) == 1
    assert actions.count("retry", Selection(include_cancelled=True)) == 2
    assert actions.run("retry", Selection(), event_data=ACTOR).changed == 1
    assert read_jobs.get_job(failure.id).status == "queued"
    assert read_jobs.get_job(cancelled.id).status == "failed"
    assert actions.run("retry", Selection(cancelled=True), event_data=ACTOR).changed == 1
    assert read_jobs.get_job(cancelled.id).status == "queued"


def test_delete_takes_finished_jobs_with_their_events_and_audits_each(app):
    done = enqueue.create_job(enqueue.JobSpec("demo.success", {}), now=T0).job
    (claimed,) = lifecycle.claim_jobs("w:1:thread-1:a", lease_seconds=30, now=T0)
    lifecycle.complete_job(claimed.id, "w:1:thread-1:a", 1, {"ok": True}, now=T0 + timedelta(seconds=1))
    queued = make_job("queued")
    kept = actions.run_one("delete", queued.id, event_data=ACTOR)  # live: kept
    assert (kept.changed, kept.status, kept.job) == (0, "queued", queued)
    outcome = actions.run_one("delete", done.id, event_data=ACTOR)
    assert (outcome.changed, outcome.status, outcome.job) == (1, "succeeded", None)
    assert read_jobs.get_job(done.id) is None and read_jobs.job_events(done.id) == []
    (entry,) = audit.for_job(done.id)
    assert (entry.action, entry.actor, entry.job_type, entry.job_status) == (
        "job_deleted",
        "olga",
        "demo.success",
        "succeeded",
    )
    assert entry.data["role"] == "operator" and entry.data["attempts"] == 1
    assert actions.run_one("delete", done.id, event_data=ACTOR).status is None  # gone: unknown now
    assert read_jobs.get_job(queued.id) is not None


def test_bulk_delete_counts_first_and_spares_live_jobs(app):
    _cancelled()
    make_job("failed", type="mail.send")
    make_job("succeeded", type="mail.send")
    make_job("succeeded", type="report.build")
    live = [make_job("queued", type="mail.send"), make_job("running", type="mail.send")]
    assert actions.count("delete", Selection()) == 4
    assert actions.count("delete", Selection(type="mail")) == 3
    assert actions.count("delete", Selection(type="mail", status="failed", cancelled=False)) == 1
    outcome = actions.run("delete", Selection(type="mail"), event_data=ACTOR)
    assert outcome.changed == 3
    assert [j.id for j in find_jobs.list_jobs(limit=10, offset=0, type="mail").results] == [
        j.id for j in sorted(live, key=lambda j: (j.created_at, j.id), reverse=True)
    ]
    entries = audit.page().entries
    assert len(entries) == 3 and all(e.bulk and e.action == "job_deleted" for e in entries)


def test_jobs_cancelled_before_the_marker_get_it_from_their_event(app):
    """Migration 0010's backfill: a failed job whose last event is its cancel."""
    from importlib import import_module

    migration = import_module("migrations.versions.0010_cancelled_audit_thread_activity")
    job, _ = _cancelled()
    other = make_job("failed", last_error="Cancelled by someone")  # no cancelled event: a failure
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE jobs_job SET cancelled_at = NULL"))
        conn.execute(text(migration.BACKFILL))
    assert read_jobs.get_job(job.id).cancelled_at is not None
    assert read_jobs.get_job(other.id).cancelled_at is None
