"""The overview's charts after a bulk enqueue larger than their read: the same figures as the
table's."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import text

from dashboard.extensions import db
from dashboard.jobs import enqueue_many
from dashboard.store import lifecycle, values
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads.overview import hour_window

WORKER = "host:1:thread-1:abcd"
BURST = 50_000  # more than the charts read (limits.CHART_EVENTS_MAX)


# What finished in the charts' hour, from the table itself (every outcome here is final).
FINISHED_SQL = """
    SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE status = 'failed')
    FROM jobs_job WHERE finished_at >= :since AND finished_at < :until
"""


def _settle(at, *, fail: bool = False) -> None:
    job = enqueue.create_job(
        enqueue.JobSpec("demo.fail" if fail else "demo.success", max_attempts=1), now=at
    ).job
    claimed = lifecycle.claim_next_job(WORKER, lease_seconds=30, now=at)
    assert claimed is not None and claimed.id == job.id
    if fail:
        lifecycle.fail_job(job.id, WORKER, 1, "boom", backoff_base_seconds=1, backoff_max_seconds=1, now=at)
    else:
        lifecycle.complete_job(job.id, WORKER, 1, {}, now=at)


def _stat(html: str, name: str) -> str:
    found = re.search(rf'data-stat="{name}">([^<]*)<', html)
    assert found, name
    return found.group(1).strip()


def test_the_overview_after_a_bulk_enqueue_shows_what_the_table_holds(app, client):
    minute = values.utcnow().replace(second=0, microsecond=0) - timedelta(minutes=2)
    for second in (5, 10, 15):
        _settle(minute + timedelta(seconds=second))
    # 50,000 jobs in one bulk enqueue (their `created` events share one instant), due tomorrow
    # so that the claims below take the settled jobs
    with db.engine.begin() as conn:
        enqueue_many([{"type": "demo.success", "delay": 86_400}] * BURST, connection=conn)
    _settle(minute + timedelta(seconds=40), fail=True)
    _settle(minute + timedelta(minutes=1, seconds=5))
    _settle(minute + timedelta(minutes=1, seconds=6), fail=True)

    start, until = hour_window(values.utcnow())
    with db.engine.connect() as conn:
        succeeded, failed = conn.execute(text(FINISHED_SQL), {"since": start, "until": until}).one()
    assert (succeeded, failed) == (4, 2)

    html = client.get("/").get_data(as_text=True)
    assert (_stat(html, "chart_succeeded"), _stat(html, "chart_failed")) == ("4", "2")
    assert _stat(html, "failure_rate_failed") == "50.0 %"  # the latest minute: 1 of 2
    assert 'data-field="charts-sampled"' not in html

    minutes = client.get("/api/jobs/stats/detail/").get_json()["minutes"]
    assert [(m["succeeded"], m["failed"], m["failure_rate"]) for m in minutes] == [(3, 1, 0.25), (1, 1, 0.5)]


def test_past_its_cap_the_overview_leaves_out_the_minutes_it_did_not_read_whole(app, client, monkeypatch):
    from dashboard.store.reads import overview as read_overview

    minute = values.utcnow().replace(second=0, microsecond=0) - timedelta(minutes=2)
    _settle(minute + timedelta(seconds=5))
    _settle(minute + timedelta(minutes=1, seconds=5))
    _settle(minute + timedelta(minutes=1, seconds=6), fail=True)
    monkeypatch.setattr(read_overview, "CHART_EVENTS_MAX", 3)  # the newest 3: inside the second minute
    html = client.get("/").get_data(as_text=True)
    assert (_stat(html, "chart_succeeded"), _stat(html, "chart_failed")) == ("0", "0")  # none in part
    counted_from = (minute + timedelta(minutes=2)).isoformat()
    assert f'<time datetime="{counted_from}" data-field="counted-from">' in html
