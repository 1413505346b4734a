"""The overview: counts, queue health, the finished-per-minute chart, workers, failures."""

from __future__ import annotations

import dataclasses
import re
import uuid
from datetime import timedelta

from dashboard.state import state_of
from dashboard.store import lifecycle, workers
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.values import utcnow
from tests.support.factories import make_job
from tests.support.forms import HX


def _stat(html: str, name: str) -> str:
    match = re.search(rf'data-stat="{name}"[^>]*>\s*(.*?)\s*<', html, re.S)
    assert match, name
    return match.group(1)


def test_overview_page_shows_counts_linked_to_the_filtered_list(app, client):
    make_job("queued")
    make_job("queued", attempts=1, available_at=utcnow() + timedelta(minutes=5))
    make_job("running", locked_until=utcnow() - timedelta(seconds=5))
    make_job("failed", last_error="disk full")
    response = client.get("/")
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "<html" in html and 'id="overview"' in html
    assert re.search(
        r'href="/jobs/\?status=queued">\s*<span class="card-value" data-status="queued">2<', html
    )
    assert re.search(
        r'href="/jobs/\?status=failed&amp;cancelled=false">\s*'
        r'<span class="card-value" data-status="failed">1<',
        html,
    )
    assert _stat(html, "overdue_running") == "1"
    assert _stat(html, "retrying") == "1"  # the queued split says it: no second "retries pending"
    assert 'data-stat="retries_pending"' not in html and 'data-stat="oldest_queued"' not in html


def test_overview_fragment_is_the_polled_block_only(app, client):
    response = client.get("/", headers=HX)
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith('<div id="overview"')
    assert 'hx-trigger="every 3s, poll-now"' in html and "data-poll" in html


def test_oldest_ready_wait_and_empty_queue(app, client):
    assert "nothing ready" in client.get("/").get_data(as_text=True)
    make_job("queued", available_at=utcnow() - timedelta(minutes=7, seconds=3))
    html = client.get("/").get_data(as_text=True)
    assert re.search(
        r'data-stat="oldest_ready_wait">\s*<time datetime="[^"]+" title="due [^"]+">7 min<', html
    )


def _finish(job_type: str, error: str | None = None) -> None:
    job = enqueue.create_job(enqueue.JobSpec(job_type, max_attempts=1)).job
    claimed = lifecycle.claim_next_job("host:1:thread-1:abcd", lease_seconds=30)
    assert claimed is not None and claimed.id == job.id
    if error is None:
        lifecycle.complete_job(job.id, "host:1:thread-1:abcd", 1, {"ok": True})
    else:
        lifecycle.fail_job(
            job.id, "host:1:thread-1:abcd", 1, error, backoff_base_seconds=1, backoff_max_seconds=1
        )


def test_chart_counts_succeeded_and_failed_events_of_the_last_hour(app, client):
    _finish("demo.success")
    _finish("demo.success")
    _finish("demo.fail", "nope")
    html = client.get("/").get_data(as_text=True)
    assert _stat(html, "chart_succeeded") == "2"
    assert _stat(html, "chart_failed") == "1"
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert svg.count('<rect class="succeeded"') == 1  # one minute, stacked
    assert svg.count('<rect class="failed"') == 1
    assert "2 succeeded, 1 failed" in svg


def test_the_charts_say_when_they_read_only_the_newest_events(app, client, monkeypatch):
    from dashboard.store.reads import overview as read_overview

    _finish("demo.success")
    _finish("demo.success")
    html = client.get("/").get_data(as_text=True)
    assert 'data-field="charts-sampled"' not in html
    monkeypatch.setattr(read_overview, "CHART_EVENTS_MAX", 3)
    html = client.get("/").get_data(as_text=True)
    assert 'data-field="charts-sampled"' in html
    assert "Figures from the newest 3 events of the hour" in html


def test_the_overview_and_the_detail_endpoint_read_the_hour_of_events_once(app, client):
    """Both charts (finishes per minute, waits, run times) come from one read of the hour's
    newest events, on the page and in ``/api/jobs/stats/detail/`` alike."""
    from sqlalchemy import event

    from dashboard.extensions import db

    _finish("demo.success")
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        for path in ("/", "/api/jobs/stats/detail/"):
            statements.clear()
            assert client.get(path).status_code == 200
            hour_reads = [s for s in statements if "FROM jobs_jobevent" in s and "created_at >=" in s]
            assert len(hour_reads) == 1, (path, hour_reads)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def test_worker_panel_lists_processes_from_heartbeats_and_warns_about_orphans(app, client):
    now = utcnow()
    alive = workers.Identity("hostA:11:aa", "hostA", 11, now, "one-job", 8, "1", 5.0, ("demo.success",))
    make_job("running", locked_by="hostA:11:thread-1:abcd")
    make_job("running", locked_by="gone:2:thread-3:ffff")  # no heartbeat row: not alive
    workers.beat(alive, jobs_done=3, now=now)  # busy: the running jobs it holds
    html = client.get("/").get_data(as_text=True)
    assert 'data-worker="hostA:11"' in html
    assert 'data-state="alive"' in html
    assert "1/8" in html
    assert 'data-orphaned="1"' in html


def test_no_workers_and_no_failures(app, client):
    html = client.get("/").get_data(as_text=True)
    assert "No worker process has reported in" in html
    assert "No failed jobs." in html


def test_latest_failures_show_the_error_escaped_and_a_retry_button(app, client):
    _finish("demo.fail", "<script>alert('x')</script> broke")
    html = client.get("/").get_data(as_text=True)
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; broke" in html
    assert re.search(r'<form method="post" action="/jobs/[0-9a-f-]{36}/retry/"', html)
    assert 'name="csrf_token"' in html


def test_a_retried_job_leaves_the_failure_list(app, client):
    _finish("demo.fail", "boom")
    job_id = re.search(r'id="failure-([0-9a-f-]{36})"', client.get("/").get_data(as_text=True)).group(1)
    actions.run_one("retry", uuid.UUID(job_id))
    assert f'id="failure-{job_id}"' not in client.get("/").get_data(as_text=True)


def test_overview_says_how_old_cached_finished_counts_are(app, client):
    from dashboard.store.reads import stats_refresh

    make_job("succeeded")
    stats_refresh.refresh_finished_counts()
    settings = state_of(app).settings
    exact = client.get("/").get_data(as_text=True)
    assert "data-counted-at" not in exact  # a small table is counted exactly
    state_of(app).settings = dataclasses.replace(settings, stats_exact_below_rows=0)
    try:
        cached = client.get("/", headers={"HX-Request": "true"}).get_data(as_text=True)
    finally:
        state_of(app).settings = settings
    assert "data-counted-at" in cached and "counted" in cached


def test_a_panel_whose_query_times_out_is_left_out_and_the_page_still_renders(app, client, monkeypatch):
    from sqlalchemy import text

    from dashboard.store import reading
    from dashboard.store.reads import stats as read_stats

    make_job("failed", last_error="still shown elsewhere")

    def slow_failures(limit: int):
        with reading.reading() as conn:
            conn.execute(text("SELECT pg_sleep(5)"))
        return []

    monkeypatch.setattr(read_stats, "latest_failures", slow_failures)
    settings = state_of(app).settings
    state_of(app).settings = dataclasses.replace(settings, dashboard_query_timeout_ms=100)
    try:
        response = client.get("/")
    finally:
        state_of(app).settings = settings
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert page.count("data-timed-out") == 1 and "The failure list" in page
    assert 'data-status="failed">1<' in page  # the other panels rendered
