"""The dashboard's smaller reads: finishes per minute, the latest failures, the feed's notice,
and list previews cut in SQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dashboard.config import rules
from dashboard.store import lifecycle
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.reads import overview as read_overview
from dashboard.store.reads import stats as read_stats

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BACKOFF = {"backoff_base_seconds": 1.0, "backoff_max_seconds": 1.0}


def _run(job_type: str, worker: str, at: datetime, error: str | None = None, max_attempts: int = 1):
    job = enqueue.create_job(enqueue.JobSpec(job_type, max_attempts=max_attempts), now=at).job
    assert lifecycle.claim_next_job(worker, lease_seconds=30, now=at) is not None
    if error is None:
        return lifecycle.complete_job(job.id, worker, 1, {}, now=at)
    return lifecycle.fail_job(job.id, worker, 1, error, now=at, **BACKOFF)


def test_finishes_per_minute_count_finishing_events_in_the_window(app):
    _run("a", "w1", T0 + timedelta(seconds=5))
    _run("a", "w1", T0 + timedelta(seconds=50))
    _run("a", "w1", T0 + timedelta(minutes=1, seconds=1), error="x")
    _run("a", "w1", T0 + timedelta(minutes=1, seconds=2), error="y", max_attempts=2)  # retry, not failed
    _run("a", "w1", T0 - timedelta(seconds=1))  # before the window
    minutes = read_overview.figures(T0, T0 + timedelta(minutes=60)).minutes.items
    assert [(m.minute, m.succeeded, m.failed) for m in minutes] == [
        (T0, 2, 0),
        (T0 + timedelta(minutes=1), 0, 1),
    ]


def test_latest_failures_lists_still_failed_jobs_once_newest_first(app):
    first = _run("a", "w", T0, error="one")
    second = _run("a", "w", T0 + timedelta(seconds=1), error="two")
    retried = _run("a", "w", T0 + timedelta(seconds=2), error="three")
    actions.run_one("retry", first.id, now=T0 + timedelta(seconds=3))
    assert lifecycle.claim_next_job("w", lease_seconds=30, now=T0 + timedelta(seconds=4)).id == first.id
    lifecycle.fail_job(first.id, "w", 1, "one again", now=T0 + timedelta(seconds=6), **BACKOFF)
    actions.run_one("retry", retried.id, now=T0 + timedelta(seconds=7))  # failed, but no longer
    failures = read_stats.latest_failures(10)
    assert [(f.job.id, f.job.last_error) for f in failures] == [(first.id, "one again"), (second.id, "two")]
    assert failures[0].failed_at == T0 + timedelta(seconds=6)
    assert len(read_stats.latest_failures(1)) == 1


def test_count_events_after_is_filtered_and_capped(app):
    jobs = [enqueue.create_job(enqueue.JobSpec("a"), now=T0).job for _ in range(5)]
    assert read_jobs.count_events_after(2) == 3
    assert read_jobs.count_events_after(0, cap=4) == 4
    assert read_jobs.count_events_after(0, type="claimed") == 0
    assert read_jobs.count_events_after(0, job_id=jobs[0].id) == 1


def test_job_lists_read_only_a_prefix_of_large_payloads_and_results_in_sql(app, client):
    from sqlalchemy import event

    from dashboard.extensions import db

    big = {"blob": "x" * 1_000_000}
    job = enqueue.create_job(enqueue.JobSpec("demo.success", big)).job
    assert lifecycle.claim_next_job("w", lease_seconds=30) is not None
    lifecycle.complete_job(job.id, "w", 1, big)
    failed = enqueue.create_job(enqueue.JobSpec("demo.fail", big, max_attempts=1)).job
    assert lifecycle.claim_next_job("w", lease_seconds=30) is not None
    lifecycle.fail_job(failed.id, "w", 1, "boom", **BACKOFF)

    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    with app.app_context():
        event.listen(db.engine, "before_cursor_execute", record)
        try:
            pages = [client.get(path) for path in ("/jobs/?limit=100", "/", "/jobs/?type=demo&limit=100")]
            fragment = client.get("/jobs/?limit=100", headers={"HX-Request": "true"})
        finally:
            event.remove(db.engine, "before_cursor_execute", record)
    for response in (*pages, fragment):
        assert response.status_code == 200
        assert len(response.get_data()) < 100_000  # the payloads (2 MB each job) are not in it
    reads = [s for s in statements if "jobs_job.payload" in s or "j.payload" in s]
    assert reads and all("left(" in s.lower() for s in reads), reads

    page = find_jobs.list_jobs(limit=100, offset=0, preview_chars=rules.PREVIEW_CHARS)
    assert {len(j.payload) for j in page.results} == {rules.PREVIEW_CHARS}
    assert all(j.result is None or len(j.result) <= rules.PREVIEW_CHARS for j in page.results)
    assert read_stats.latest_failures(10)[0].job.payload.startswith('{"blob": "xxx')
    # The API keeps the whole values.
    listed = client.get("/api/jobs/?limit=100").get_json()["results"]
    assert {len(j["payload"]["blob"]) for j in listed} == {1_000_000}
