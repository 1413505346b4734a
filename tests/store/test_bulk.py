"""Bulk create: one transaction of pipelined chunks, all-or-nothing, idempotency keys per job."""

from __future__ import annotations

import math
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta, timezone

import pytest
from sqlalchemy.exc import DBAPIError

from dashboard.store import connection
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.reads import stats as read_stats

from .helpers import T0, at, event_types


def test_bulk_create_keeps_order_fields_and_events(app):
    specs = [
        JobSpec("demo.success", {"i": 1}),
        JobSpec("demo.fail", {"i": 2}, priority=90, max_attempts=5, available_at=at(60)),
        JobSpec("demo.slow", None, idempotency_key="bulk-a"),
    ]
    results = enqueue.create_jobs(specs, event_data={"source": "test"}, now=T0)
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
    old = enqueue.create_job(JobSpec("demo.success", idempotency_key="taken"), now=T0).job
    results = enqueue.create_jobs(
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
    assert find_jobs.list_jobs(limit=10, offset=0).count == 3
    assert len(read_jobs.list_events(limit=10, type="created").results) == 3


def test_bulk_create_checks_everything_before_writing(app):
    with pytest.raises(ValueError, match="job 2"):
        enqueue.create_jobs([JobSpec("a"), JobSpec("b"), JobSpec("c", priority=99999)])
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0


def test_bulk_create_of_nothing(app):
    assert enqueue.create_jobs([]) == []


def test_bulk_create_of_many(app):
    results = enqueue.create_jobs([JobSpec("demo.success", {"i": i}) for i in range(2500)], now=T0)
    assert len({r.job.id for r in results}) == 2500
    assert [r.job.payload["i"] for r in results] == list(range(2500))
    assert read_stats.stats(T0).by_status["queued"] == 2500


def test_bulk_create_accepts_any_utc_offset(app):
    far_east = at(60).astimezone(timezone(timedelta(hours=20)))  # beyond PostgreSQL's text offsets
    job = enqueue.create_jobs([JobSpec("demo.success", available_at=far_east)], now=T0)[0].job
    assert job.available_at == at(60)


def test_bulk_records_are_the_rows_written(app):
    """The new jobs' records are built from their specs; they equal the rows read back."""
    elsewhere = timezone(timedelta(hours=5, minutes=30))
    specs = [
        JobSpec("demo.success", [1, 2.5, "three", None, {"nested": [True]}]),
        JobSpec("demo.success", "just a string", available_at=at(90).astimezone(elsewhere)),
        JobSpec("demo.success", {"b": 1, "a": {"z": 0, "y": -1.25}}, priority=-100, max_attempts=1),
    ]
    results = enqueue.create_jobs(specs, now=at(5).astimezone(elsewhere))
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
            enqueue.create_jobs(bad, conn=conn)
        assert find_jobs.list_jobs(limit=10, offset=0).count == 0
        results = enqueue.create_jobs([JobSpec("demo.success", idempotency_key="after")], now=T0, conn=conn)
        assert results[0].created and read_jobs.get_job(results[0].job.id) == results[0].job


def test_a_key_held_by_an_earlier_chunk_returns_that_job(app):
    """The jobs go in chunk by chunk, in one transaction: a later chunk sees the earlier ones."""
    specs = [JobSpec("demo.success", {"i": i}) for i in range(enqueue.CREATE_CHUNK + 1)]
    specs[0] = JobSpec("demo.success", {"i": 0}, idempotency_key="early")
    specs[-1] = JobSpec("demo.fail", idempotency_key="early")  # in the second chunk
    results = enqueue.create_jobs(specs, now=T0)
    assert results[-1].created is False and results[-1].job == results[0].job
    assert sum(r.created for r in results) == len(specs) - 1
    assert find_jobs.list_jobs(limit=1, offset=0).count == len(specs) - 1


def test_a_refused_later_chunk_writes_nothing(app):
    specs = [JobSpec("demo.success") for _ in range(enqueue.CREATE_CHUNK + 1)]
    specs[-1] = JobSpec("demo.success", {"x": math.nan})  # in the second chunk
    with pytest.raises(DBAPIError):
        enqueue.create_jobs(specs)
    assert find_jobs.list_jobs(limit=1, offset=0).count == 0
    assert read_jobs.list_events(limit=1, type="created").results == []


def test_the_callers_meanwhile_sees_every_record_as_created(app):
    """``meanwhile`` gets one record per spec, in the specs' order, as the job is if created:
    a created job's result is that record; a deduplicated one's is the job holding the key."""
    taken = enqueue.create_jobs([JobSpec("demo.success", idempotency_key="taken")], now=T0)[0].job
    specs = [JobSpec("demo.success", {"i": i}, idempotency_key=f"m{i}") for i in range(3)]
    specs.insert(1, JobSpec("demo.fail", idempotency_key="taken"))
    seen: list[list[object]] = []
    results = enqueue.create_jobs(specs, now=T0, meanwhile=seen.append)
    assert len(seen) == 1 and len(seen[0]) == len(specs)
    assert [r.created for r in results] == [True, False, True, True]
    assert [job.type for job in seen[0]] == [spec.type for spec in specs]
    for result, record in zip(results, seen[0], strict=True):
        assert result.job == (record if result.created else taken)


@pytest.mark.parametrize(
    "where", ["building the second chunk", "building the records", "the caller's meanwhile"]
)
def test_a_client_error_mid_pipeline_writes_nothing(app, monkeypatch, where):
    """The first chunk is on the server before the client fails: it must be rolled back."""
    made = []

    def uuid4() -> uuid.UUID:  # the second job's id is made while building the second chunk
        made.append(uuid.UUID(int=len(made) + 1))
        if where == "building the second chunk" and len(made) == 2:
            raise RuntimeError("client failed")
        return made[-1]

    def new_record(*args: object) -> None:
        raise RuntimeError("client failed")

    monkeypatch.setattr(enqueue, "CREATE_CHUNK", 1)
    monkeypatch.setattr(enqueue.uuid, "uuid4", uuid4)
    if where == "building the records":
        monkeypatch.setattr(enqueue, "new_record", new_record)
    specs = [JobSpec("demo.success", idempotency_key="sent-first"), JobSpec("demo.success")]
    meanwhile = new_record if where == "the caller's meanwhile" else None
    with connection.connect() as conn:
        with pytest.raises(RuntimeError, match="client failed"):
            enqueue.create_jobs(specs, conn=conn, meanwhile=meanwhile)
        assert made  # the first chunk was built, so it went out
        assert find_jobs.list_jobs(limit=1, offset=0).count == 0
        assert read_jobs.list_events(limit=1, type="created").results == []
        monkeypatch.undo()
        assert enqueue.create_jobs(specs[:1], now=T0, conn=conn)[0].created  # the connection works on


def test_concurrent_bulk_creates_sharing_keys_do_not_deadlock(app):
    """Two requests hold the same two keys in opposite orders, in different chunks. Inserted in
    request order, each took its first key and then waited for the other's: a deadlock, and
    one request refused. Keyed rows go in by key, so one waits for the other and both succeed."""
    filler = [JobSpec("demo.success") for _ in range(enqueue.CREATE_CHUNK)]
    for round_ in range(5):
        first, second = f"{round_}-a", f"{round_}-b"
        requests = [
            [
                JobSpec("demo.success", idempotency_key=first),
                *filler,
                JobSpec("demo.fail", idempotency_key=second),
            ],
            [
                JobSpec("demo.success", idempotency_key=second),
                *filler,
                JobSpec("demo.fail", idempotency_key=first),
            ],
        ]
        start = threading.Barrier(2)

        def create(specs: list[JobSpec], start: threading.Barrier = start) -> list:
            with app.app_context():
                start.wait()
                return enqueue.create_jobs(specs)

        with ThreadPoolExecutor(2) as pool:
            outcomes = list(pool.map(create, requests))  # a deadlock would raise here
        by_key = {
            r.job.idempotency_key: r.job for results in outcomes for r in results if r.job.idempotency_key
        }
        assert sorted(by_key) == [first, second]
        for results in outcomes:  # each request names the one job that holds each key
            keyed = {r.job.idempotency_key: r.job for r in results if r.job.idempotency_key}
            assert keyed == by_key
        assert sum(r.created for results in outcomes for r in results if r.job.idempotency_key) == 2
