"""The overview's detailed figures: the queued split, the oldest ready wait, per-type rows,
the waits and run times the events record, and the index each figure reads."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import read_jobs, read_overview, service
from dashboard.store.read_overview import Capped
from tests.factories import make_job


def test_queued_splits_into_ready_scheduled_and_retrying_and_the_wait_is_the_oldest_ready(app):
    now = service.utcnow()
    make_job("queued", now=now, available_at=now - timedelta(seconds=90))  # ready 90 s
    make_job("queued", now=now, available_at=now - timedelta(seconds=30), attempts=1)  # due retry: ready
    make_job("queued", now=now - timedelta(days=2), available_at=now + timedelta(hours=24))  # scheduled
    make_job("queued", now=now, available_at=now + timedelta(seconds=40), attempts=2, type="mail.send")
    make_job("running", now=now, type="mail.send")
    make_job("failed", now=now, type="mail.send", finished_at=now - timedelta(hours=1))
    make_job("failed", now=now, type="mail.send", finished_at=now - timedelta(hours=30))

    detail = read_overview.queue_detail(now)
    assert (detail.ready.value, detail.scheduled.value, detail.retrying.value) == (2, 1, 1)
    assert detail.running.value == 1 and detail.oldest_ready_wait_seconds == 90
    rows = {row.type: row for row in detail.types}
    assert rows["demo.success"].ready.value == 2 and rows["demo.success"].wait_seconds == 90
    assert rows["mail.send"].retrying.value == 1 and rows["mail.send"].running == 1
    assert rows["mail.send"].failed_24h.value == 1 and rows["mail.send"].wait_seconds is None


def test_a_capped_count_says_more_than():
    assert str(Capped(10, 10)) == "10" and Capped(10, 10).exact
    assert str(Capped(11, 10)) == "more than 10" and Capped(11, 10).as_dict() == {"count": 10, "exact": False}


def test_claims_record_the_wait_and_outcomes_the_run_time(app):
    now = service.utcnow()
    job = service.create_job("demo.success", {}, available_at=now - timedelta(seconds=2)).job
    claimed = service.claim_next_job("w1", lease_seconds=30, now=now + timedelta(seconds=1))
    assert claimed is not None and claimed.id == job.id
    service.complete_job(job.id, "w1", claimed.attempts, {"ok": True}, now=now + timedelta(seconds=4))
    events = {e.type: e for e in read_jobs.job_events(job.id)}
    assert events["claimed"].data["wait_ms"] >= 3000
    assert events["succeeded"].data == {"type": "demo.success", "run_ms": 3000}

    minutes = read_overview.minute_figures(now - timedelta(minutes=5), now + timedelta(minutes=5))
    assert sum(m.succeeded for m in minutes) == 1
    assert any(m.wait_p50_ms and m.wait_p50_ms >= 3000 for m in minutes)
    runs = read_overview.run_times(now - timedelta(minutes=5), now + timedelta(minutes=5))
    assert [(r.type, r.runs, r.p50_ms) for r in runs] == [("demo.success", 1, 3000)]


def test_the_live_figures_read_the_queued_and_failed_indexes(app):
    with db.engine.begin() as conn:
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            conn.execute(
                text("EXPLAIN " + str(read_overview.TYPE_SPLIT)),
                {"now": service.utcnow(), "cap": 11, "type": "x"},
            ).scalars()
        )
        failed = "\n".join(
            conn.execute(
                text("EXPLAIN " + str(read_overview.FAILED_SQL)),
                {"since": service.utcnow(), "cap": 11, "type": "x"},
            ).scalars()
        )
    assert "job_queued_type_idx" in plan and "job_failed_type_idx" in failed
