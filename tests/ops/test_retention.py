"""Retention: expired finished jobs go with their events, in batches, one pruner at a time;
queued and running jobs, and finished ones inside their retention, stay."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, text

from dashboard.config import ConfigError, Settings, parse_days
from dashboard.extensions import db
from dashboard.runtime.pruner import Pruner
from dashboard.store.lifecycle import actions, retention
from dashboard.store.models import Job, JobEvent
from dashboard.store.reads import stats as read_stats
from dashboard.store.reads import stats_refresh
from dashboard.store.values import utcnow
from tests.support.factories import make_job, seed_analysed_backlog


def old(status: str, days: float, **fields):
    """A finished job ``days`` old, with three events (created, claimed, its end)."""
    now = utcnow() - timedelta(days=days)
    job = make_job(status, now=now, **fields)
    with db.engine.begin() as conn:
        for kind in ("created", "claimed", status):
            conn.execute(
                JobEvent.__table__.insert().values(job_id=job.id, type=kind, attempt=1, created_at=now)
            )
    return job


def counts() -> tuple[int, int]:
    with db.engine.connect() as conn:
        jobs = conn.execute(select(func.count()).select_from(Job)).scalar_one()
        events = conn.execute(select(func.count()).select_from(JobEvent)).scalar_one()
    return jobs, events


def test_settings_accept_days_and_units():
    assert parse_days("7", "X") == 7 and parse_days("12h", "X") == 0.5 and parse_days("0", "X") == 0
    assert parse_days("1.5d", "X") == 1.5 and parse_days("90m", "X") == 90 / 1440
    ops = Settings.from_env({}).ops
    assert (ops.retention_succeeded_days, ops.retention_failed_days) == (7, 30)
    for bad in ("-1", "forever", "7 days", "1e400"):
        with pytest.raises(ConfigError, match="JOB_RETENTION_FAILED"):
            Settings.from_env({"JOB_RETENTION_FAILED": bad})
    assert Settings.from_env({"JOB_RETENTION_FAILED": ""}).ops.retention_failed_days == 30  # unset


def test_an_age_past_a_hundred_years_is_refused_at_start_not_in_every_pass():
    """Millions of days passed validation, then every pass failed with OverflowError (now minus
    the age is before year 1). The longest age accepted still gives a cutoff."""
    for bad in ("3000000", "1000000d", "200000w", "36501"):
        with pytest.raises(ConfigError, match="JOB_RETENTION_SUCCEEDED must be at most 36,500 days"):
            Settings.from_env({"JOB_RETENTION_SUCCEEDED": bad})
    longest = Settings.from_env({"JOB_RETENTION_SUCCEEDED": "36500", "JOB_RETENTION_FAILED": "5214w"}).ops
    limits = retention.cutoffs(
        {"succeeded": longest.retention_succeeded_days, "failed": longest.retention_failed_days}
    )
    assert all(cutoff.year > 1900 for cutoff in limits.values())
    with pytest.raises(ConfigError, match="--older-than must be at most"):
        parse_days("5000000d", "--older-than")


def test_prune_removes_expired_jobs_with_their_events_in_batches(app):
    for _ in range(5):
        old("succeeded", 8)
    keep_recent = old("succeeded", 6)
    old_failed = old("failed", 31)
    keep_failed = old("failed", 20)
    keep_queued = make_job("queued", now=utcnow() - timedelta(days=400))
    keep_running = make_job("running", now=utcnow() - timedelta(days=400))
    batches = []
    limits = retention.cutoffs({"succeeded": 7, "failed": 30})
    removed = retention.prune(limits, batch_size=2, pause_seconds=0, on_batch=lambda *b: batches.append(b))
    assert removed.jobs == {"succeeded": 5, "failed": 1} and removed.events == {"succeeded": 15, "failed": 3}
    assert [b[1] for b in batches] == [2, 2, 1, 1]  # never more than the batch size per statement
    kept = {keep_recent.id, keep_failed.id, keep_queued.id, keep_running.id}
    with db.engine.connect() as conn:
        assert set(conn.execute(select(Job.id)).scalars()) == kept
        assert conn.execute(select(func.count()).where(JobEvent.job_id == old_failed.id)).scalar_one() == 0
    assert read_stats.stats(utcnow()).by_status["succeeded"] == 1  # totals count the jobs kept


def test_zero_keeps_forever(app):
    old("succeeded", 3650)
    assert retention.cutoffs({"succeeded": 0, "failed": 0}) == {}
    assert retention.prune(retention.cutoffs({"succeeded": 0, "failed": 30})).total_jobs == 0
    assert counts() == (1, 3)


def test_the_stats_view_is_recounted_after_a_pass(app):
    for _ in range(3):
        old("succeeded", 10)
    stats_refresh.refresh_finished_counts()
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT succeeded FROM jobs_finished_counts")).scalar_one() == 3
    retention.prune(retention.cutoffs({"succeeded": 7}))
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT succeeded FROM jobs_finished_counts")).scalar_one() == 0


def test_a_second_pruner_does_not_wait_and_stops(app, libpq_url):
    old("succeeded", 10)
    with psycopg.connect(libpq_url) as holder:  # another process mid-batch holds the lock
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (retention.LOCK_KEY,))
        removed = retention.prune(retention.cutoffs({"succeeded": 7}))
    assert removed.busy and removed.total_jobs == 0
    assert "another process is pruning" in removed.describe()
    assert counts() == (1, 3)


def test_a_job_retried_meanwhile_is_not_deleted(app):
    job = old("failed", 40)
    actions.run_one("retry", job.id)  # failed -> queued: no longer finished, whatever finished_at said
    assert retention.prune(retention.cutoffs({"failed": 30})).total_jobs == 0
    assert counts()[0] == 1


# Finished jobs over the last ten days beside a backlog, for a plan on an analysed table.
FINISHED_ROWS_SQL = """
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                          max_attempts, last_error, created_at, updated_at, finished_at)
    SELECT gen_random_uuid(), 'demo.t' || (g % 7), '{}',
           CASE WHEN g % 5 = 0 THEN 'failed' ELSE 'succeeded' END, 0, :now, 1, 3,
           CASE WHEN g % 5 = 0 THEN 'boom' ELSE '' END, :now, :now,
           CAST(:now AS timestamptz) - (g % 14400) * interval '1 minute'
    FROM generate_series(1, 10000) AS g
"""


def test_the_batch_delete_walks_the_finished_index(app):
    """Planned on an analysed table (rolled back): on statistics an earlier ANALYZE left
    behind (of a table without finished jobs, since truncated), the status index can win."""
    now = utcnow()
    params = {"status": "succeeded", "cutoff": now - timedelta(days=7), "batch": 1000}
    with db.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text(FINISHED_ROWS_SQL), {"now": now})
        seed_analysed_backlog(conn, now)
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(text("EXPLAIN " + retention.DELETE_BATCH.text), params))
        transaction.rollback()
    assert "job_finished_idx" in plan, plan
    assert "Limit" in plan, plan


def test_prune_command_dry_run_then_for_real(app):
    for _ in range(2):
        old("succeeded", 3)
    old("succeeded", 1)
    runner = CliRunner()
    cli = app.cli
    dry = runner.invoke(cli, ["prune", "--dry-run", "--older-than", "2d"], obj=_script_info(app))
    assert dry.exit_code == 0, dry.output
    assert "would remove 2 succeeded job(s) and 6 event(s)" in dry.output
    assert counts() == (3, 9)
    real = runner.invoke(cli, ["prune", "--older-than", "48h"], obj=_script_info(app))
    assert real.exit_code == 0, real.output
    assert "removed 2 succeeded job(s) and 6 event(s)" in real.output
    assert "removed 0 failed job(s)" in real.output
    assert counts() == (1, 3)
    assert runner.invoke(cli, ["prune", "--older-than", "soon"], obj=_script_info(app)).exit_code == 2
    assert runner.invoke(cli, ["prune", "--older-than", "0"], obj=_script_info(app)).exit_code == 2


def test_the_workers_retention_thread_prunes(app):
    old("succeeded", 10)
    stopping = threading.Event()
    pruner = Pruner(app, {"succeeded": 7, "failed": 0}, 1.0, stopping)
    pruner.start()
    try:
        from tests.support.waiting import wait_until

        wait_until(lambda: counts() == (0, 0), 15, "the retention thread to prune")
    finally:
        pruner.stop()
        assert pruner.thread is not None
        pruner.thread.join(10)


def _script_info(app):
    from flask.cli import ScriptInfo

    return ScriptInfo(create_app=lambda: app)
