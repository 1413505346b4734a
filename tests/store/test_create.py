"""Creating jobs: defaults, idempotency keys, and the race on one key."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from flask import Flask

from dashboard.extensions import engine
from dashboard.runtime import handlers
from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.records import CreateResult

from .helpers import T0, at, event_types


def test_create_sets_defaults_and_emits_created(app):
    result = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 1}), now=T0)
    job = result.job
    assert result.created is True
    assert (job.status, job.priority, job.attempts, job.max_attempts) == ("queued", 50, 0, 3)
    assert job.available_at == T0 and job.created_at == T0 and job.updated_at == T0
    assert job.payload == {"sleep_seconds": 1}
    assert job.last_error == "" and job.result is None and job.finished_at is None
    events = read_jobs.job_events(job.id)
    assert [(e.type, e.attempt, e.worker_id, e.message, e.data) for e in events] == [
        ("created", 0, None, "Job created", {"type": "demo.success"})
    ]


def test_create_without_payload_stores_an_empty_object(app):
    assert enqueue.create_job(JobSpec("demo.success"), now=T0).job.payload == {}


def test_idempotency_key_returns_the_existing_job(app):
    first = enqueue.create_job(JobSpec("demo.success", {"a": 1}, idempotency_key="k-1"), now=T0)
    second = enqueue.create_job(JobSpec("demo.fail", {"b": 2}, idempotency_key="k-1"), now=at(5))
    assert first.created is True and second.created is False
    assert second.job == first.job
    assert find_jobs.list_jobs(limit=10, offset=0).count == 1
    assert event_types(first.job.id) == ["created"]


def test_threads_racing_on_one_key_leave_one_row(app: Flask):
    threads = 12
    barrier = threading.Barrier(threads)
    results: list[CreateResult] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        with app.app_context():
            barrier.wait()
            result = enqueue.create_job(JobSpec("demo.success", {"n": n}, idempotency_key="race"))
            with lock:
                results.append(result)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert len(results) == threads
    assert sum(r.created for r in results) == 1
    assert len({r.job.id for r in results}) == 1
    assert find_jobs.list_jobs(limit=100, offset=0).count == 1
    assert len(read_jobs.list_events(limit=100, type="created").results) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"type": ""},
        {"type": "x" * 121},
        {"type": "t", "priority": 40000},
        {"type": "t", "max_attempts": 0},
        {"type": "t", "available_at": datetime(2026, 1, 1)},
        {"type": "t", "idempotency_key": ""},
    ],
)
def test_engine_refuses_invalid_input_and_writes_nothing(app, kwargs):
    with pytest.raises(ValueError):
        enqueue.create_job(JobSpec(**kwargs))
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0


@pytest.mark.parametrize(
    "job_type", ["report\u202e.build", "mail\nsend", "\x1b[2Jclear", "a\u200db", "a\u2029b"]
)
def test_a_type_with_a_control_or_format_character_is_refused_naming_it(app, job_type):
    with pytest.raises(ValueError, match=r"^type must not contain control or invisible formatting"):
        enqueue.create_job(JobSpec(job_type))
    with pytest.raises(ValueError, match="job 1: type must not contain"):
        enqueue.create_jobs([JobSpec("ok"), JobSpec(job_type)])
    with pytest.raises(ValueError, match="a job type must not contain"):
        handlers.handler(job_type)
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0


def test_naive_now_is_refused(app):
    with pytest.raises(ValueError):
        lifecycle.claim_next_job("w", lease_seconds=30, now=datetime(2026, 1, 1))


def test_the_record_a_create_returns_is_the_row_it_wrote(app):
    """A create reads nothing back: the record is built from what was sent, so it must equal
    the row, every column, also for a time given in another zone and a payload in any key order."""
    elsewhere = timezone(timedelta(hours=-5))
    spec = JobSpec(
        "demo.success",
        {"z": [1, 2.5, None], "a": {"nested": "é"}},
        priority=70,
        available_at=at(30).astimezone(elsewhere),
        max_attempts=5,
        idempotency_key="the-row",
        queue="reports",
        workflow="wf-1",
        traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01",
    )
    made = enqueue.create_job(spec, now=T0.astimezone(elsewhere)).job
    assert made == read_jobs.get_job(made.id)
    assert made.available_at.utcoffset() == made.created_at.utcoffset() == timedelta(0)  # as read: UTC
    with engine().connect() as conn, conn.begin():
        within = enqueue.create_job(spec._replace(idempotency_key="within"), now=T0, within=conn).job
    assert within == read_jobs.get_job(within.id)
