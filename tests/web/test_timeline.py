"""The job page's folded timeline and its small live poll."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import event, text

from dashboard.config.rules import TIMELINE_EVENTS_MAX
from dashboard.extensions import db
from dashboard.store import lifecycle
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs

HX = {"HX-Request": "true"}
WORKER = "w:1:thread-1:aaaa"


def _long_running_job():
    job = enqueue.create_job(enqueue.JobSpec("demo.slow")).job
    claimed = lifecycle.claim_next_job(WORKER, lease_seconds=30)
    assert claimed is not None and claimed.id == job.id
    for percent in range(0, 100, 1):
        lifecycle.record_progress(job.id, WORKER, 1, message="x" * 40, data={"percent": percent})
        if percent % 10 == 0:
            lifecycle.renew_lease(job.id, WORKER, 1, lease_seconds=30)
    return job


def test_progress_and_renewals_fold_into_one_line_and_the_poll_sends_only_what_changed(app, client):
    job = _long_running_job()
    page = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "+ 100 progress, 10 lease renewals, latest 99 % so far" in page
    assert page.count('data-event-type="progress"') == 0
    poll = re.search(r'hx-get="(/jobs/[^"]+/live/[^"]+)"', page).group(1).replace("&amp;", "&")
    response = client.get(poll, headers=HX)
    body = response.get_data()
    assert response.status_code == 200 and len(body) < 10_000, len(body)
    assert b"99 %" in body and b'hx-swap-oob="true"' in body and b"beforeend:#timeline" not in body

    lifecycle.complete_job(job.id, WORKER, 1, {"ok": True})
    done = client.get(poll, headers=HX)
    assert done.headers["HX-Retarget"] == "#job-detail" and done.headers["HX-Reswap"] == "morph"
    assert b'data-status="succeeded"' in done.get_data()


def test_new_lifecycle_events_are_appended_after_the_last_shown(app, client):
    later = datetime.now(UTC) + timedelta(hours=1)
    job = enqueue.create_job(enqueue.JobSpec("demo.success", available_at=later)).job
    created = read_jobs.job_events(job.id)[0].id
    response = client.get(f"/jobs/{job.id}/live/?after={created}&status=queued", headers=HX)
    assert b"beforeend:#timeline" not in response.get_data()  # nothing new yet

    assert actions.run_one("run_now", job.id, event_data={"actor": "ops"}).changed  # queued -> queued
    rescheduled = read_jobs.job_events(job.id)[-1]
    assert rescheduled.type == "rescheduled"
    body = client.get(f"/jobs/{job.id}/live/?after={created}&status=queued", headers=HX).get_data()
    assert b"beforeend:#timeline" in body
    assert f'data-event-id="{rescheduled.id}"'.encode() in body
    assert f'data-event-id="{created}"'.encode() not in body
    for bad in ("after=x", "after=-1", "status=%00"):
        assert client.get(f"/jobs/{job.id}/live/?{bad}", headers=HX).status_code == 200
    assert client.get("/jobs/nope/live/").status_code == 404


def _flood(job_id, count: int) -> None:
    """``count`` progress events of attempt 1, written in one statement (as a worker would, one by one)."""
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at) "
                "SELECT :id, 'progress', 1, :worker, 'step', jsonb_build_object('percent', g % 100), now() "
                "FROM generate_series(1, :n) AS g"
            ),
            {"id": job_id, "worker": WORKER, "n": count},
        )


@contextmanager
def event_rows_read() -> Iterator[list[int]]:
    """How many rows each statement that reads jobs_jobevent returned."""
    counts: list[int] = []

    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "jobs_jobevent" in statement:
            counts.append(cursor.rowcount)

    event.listen(db.engine, "after_cursor_execute", after)
    try:
        yield counts
    finally:
        event.remove(db.engine, "after_cursor_execute", after)


def test_a_job_with_many_events_is_read_as_a_window_on_its_page_and_in_its_poll(app, client):
    """3,000 progress reports: the page and each poll read at most TIMELINE_EVENTS_MAX + 1 of
    them (they read all 3,000 before); the page says where the older ones are."""
    job = enqueue.create_job(enqueue.JobSpec("demo.slow")).job
    assert lifecycle.claim_next_job(WORKER, lease_seconds=30).id == job.id
    _flood(job.id, 3 * TIMELINE_EVENTS_MAX)
    with event_rows_read() as counts:
        response = client.get(f"/jobs/{job.id}/")
    page = response.get_data(as_text=True)
    assert response.status_code == 200 and counts and max(counts) <= TIMELINE_EVENTS_MAX + 1, counts
    assert "data-older-events" in page and f"/api/jobs/{job.id}/events/" in page
    assert f"+ {TIMELINE_EVENTS_MAX} progress" in page
    poll = re.search(r'hx-get="(/jobs/[^"]+/live/[^"]+)"', page).group(1).replace("&amp;", "&")
    with event_rows_read() as counts:
        quiet = client.get(poll, headers=HX)  # nothing new: the header and the window's tail
    assert quiet.status_code == 200 and max(counts) <= TIMELINE_EVENTS_MAX + 1, counts
    _flood(job.id, 10)
    with event_rows_read() as counts:
        moved = client.get(poll, headers=HX)  # past the window: the page again, its own window
    assert max(counts) <= TIMELINE_EVENTS_MAX + 1, counts
    assert moved.headers["HX-Retarget"] == "#job-detail" and b"data-older-events" in moved.get_data()
    with event_rows_read() as counts:
        stale = client.get(
            f"/jobs/{job.id}/live/?after=0&status=running", headers=HX
        )  # a tab back after hours
    assert stale.status_code == 200 and max(counts) <= TIMELINE_EVENTS_MAX + 1, counts
    assert sum(counts) <= TIMELINE_EVENTS_MAX + 2, counts  # one window and a probe, not two windows
    # the API's list stays whole (the reference's shape)
    assert len(client.get(f"/api/jobs/{job.id}/events/").get_json()) == 3 * TIMELINE_EVENTS_MAX + 12


def test_a_job_within_the_window_shows_its_whole_timeline(app, client):
    job = _long_running_job()
    page = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "data-older-events" not in page
    assert 'data-event-type="created"' in page


def test_current_progress_is_the_newest_report_of_the_running_attempt(app):
    """One rule for the page and its poll (``timeline.current_progress``): the newest
    ``progress`` event of the job's current attempt, only while it runs."""
    from dashboard.store.records import EventRecord
    from dashboard.web.timeline import current_progress
    from tests.support.factories import make_job

    job = make_job("running", attempts=2, locked_by=WORKER)

    def report(event_id: int, attempt: int, data: object) -> EventRecord:
        return EventRecord(event_id, job.id, "progress", attempt, WORKER, "", data, job.created_at)

    older, renewal = (
        report(1, 1, {"percent": 90}),
        dataclasses.replace(report(2, 2, {}), type="lease_renewed"),
    )
    assert current_progress(job, [older]) is None  # the last attempt's, not this one's
    events = [older, report(3, 2, {"percent": 20}), report(4, 2, {"percent": 140}), renewal]
    assert current_progress(job, events) == 100.0  # the newest, clamped; a renewal is no report
    assert current_progress(job, [*events, report(5, 2, {"step": "x"})]) is None  # newest says none
    assert current_progress(make_job("succeeded"), events) is None
