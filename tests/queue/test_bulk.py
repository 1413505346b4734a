"""Bulk create: one statement, all-or-nothing checks, idempotency keys per job."""

from __future__ import annotations

import math
from datetime import timedelta, timezone

import pytest
from sqlalchemy.exc import DBAPIError

from dashboard.store import connection, read_jobs, read_stats, service
from dashboard.store.service import JobSpec

from .helpers import T0, at, event_types


def test_bulk_create_keeps_order_fields_and_events(app):
    specs = [
        JobSpec("demo.success", {"i": 1}),
        JobSpec("demo.fail", {"i": 2}, priority=90, max_attempts=5, available_at=at(60)),
        JobSpec("demo.slow", None, idempotency_key="bulk-a"),
    ]
    results = service.create_jobs(specs, event_data={"source": "test"}, now=T0)
    assert [r.created for r in results] == [True, True, True]
    jobs = [r.job for r in results]
    assert [j.type for j in jobs] == ["demo.success", "demo.fail", "demo.slow"]
    assert [j.payload for j in jobs] == [{"i": 1}, {"i": 2}, {}]
    assert (jobs[1].priority, jobs[1].max_attempts, jobs[1].available_at) == (90, 5, at(60))
    assert jobs[0].available_at == T0 and jobs[0].status == "queued" and jobs[0].attempts == 0
    assert jobs[2].idempotency_key == "bulk-a"
    for job in jobs:
        assert read_jobs.get_job(job.id) == job
        assert event_types(job.id) == ["created"]
    event = read_jobs.job_events(jobs[1].id)[0]
    assert event.data == {"source": "test", "type": "demo.fail"}


def test_bulk_create_honours_idempotency_keys_per_job(app):
    old = service.create_job("demo.success", idempotency_key="taken", now=T0).job
    results = service.create_jobs(
        [
            JobSpec("demo.success", idempotency_key="taken"),
            JobSpec("demo.success", idempotency_key="new"),
            JobSpec("demo.fail", idempotency_key="new"),  # same key twice in one batch
            JobSpec("demo.success"),
        ],
        now=at(1),
    )
    assert [r.created for r in results] == [False, True, False, True]
    assert results[0].job == old
    assert results[2].job == results[1].job and results[2].job.type == "demo.success"
    assert read_jobs.list_jobs(limit=10, offset=0).count == 3
    assert len(read_jobs.list_events(limit=10, type="created").results) == 3


def test_bulk_create_checks_everything_before_writing(app):
    with pytest.raises(ValueError, match="job 2"):
        service.create_jobs([JobSpec("a"), JobSpec("b"), JobSpec("c", priority=99999)])
    assert read_jobs.list_jobs(limit=10, offset=0).count == 0


def test_bulk_create_of_nothing(app):
    assert service.create_jobs([]) == []


def test_bulk_create_of_many(app):
    results = service.create_jobs([JobSpec("demo.success", {"i": i}) for i in range(2500)], now=T0)
    assert len({r.job.id for r in results}) == 2500
    assert [r.job.payload["i"] for r in results] == list(range(2500))
    assert read_stats.stats(T0).by_status["queued"] == 2500


def test_bulk_create_accepts_any_utc_offset(app):
    far_east = at(60).astimezone(timezone(timedelta(hours=20)))  # beyond PostgreSQL's text offsets
    job = service.create_jobs([JobSpec("demo.success", available_at=far_east)], now=T0)[0].job
    assert job.available_at == at(60)


def test_bulk_records_are_the_rows_written(app):
    """The new jobs' records are built from their specs; they equal the rows read back."""
    elsewhere = timezone(timedelta(hours=5, minutes=30))
    specs = [
        JobSpec("demo.success", [1, 2.5, "three", None, {"nested": [True]}]),
        JobSpec("demo.success", "just a string", available_at=at(90).astimezone(elsewhere)),
        JobSpec("demo.success", {"b": 1, "a": {"z": 0, "y": -1.25}}, priority=-100, max_attempts=1),
    ]
    results = service.create_jobs(specs, now=at(5).astimezone(elsewhere))
    for result in results:
        assert result.created
        assert read_jobs.get_job(result.job.id) == result.job
    assert results[1].job.available_at.utcoffset() == timedelta(0)
    assert results[0].job.created_at == results[0].job.updated_at == at(5)


def test_a_refused_bulk_statement_writes_nothing_and_leaves_the_connection_usable(app):
    """The statement goes out in pipeline mode: a refusal by the database comes back as the
    usual SQLAlchemy error, nothing of the batch is written, and the connection works on."""
    with connection.connect() as conn:
        with pytest.raises(DBAPIError):  # jsonb refuses NaN, which json.dumps writes
            bad = [JobSpec("demo.success"), JobSpec("demo.success", {"x": math.nan})]
            service.create_jobs(bad, conn=conn)
        assert read_jobs.list_jobs(limit=10, offset=0).count == 0
        results = service.create_jobs([JobSpec("demo.success", idempotency_key="after")], now=T0, conn=conn)
        assert results[0].created and read_jobs.get_job(results[0].job.id) == results[0].job
