"""``GET /metrics`` on the web app: the queue gauges against known rows, their plans, access."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.state import state_of
from dashboard.store import workers
from dashboard.store.flow.schedules import Declaration, fire_due, set_paused, sync
from dashboard.store.lifecycle import utcnow
from dashboard.store.reads import metrics as read_metrics
from dashboard.store.reads import stats as read_stats
from dashboard.store.reads import stats_refresh
from dashboard.store.reads.stats import DEFAULT_POLICY
from dashboard.store.states import WAITING_AT
from tests.support.factories import make_job, seed_analysed_backlog
from tests.support.secured import VIEWER_TOKEN, bearer, build

from .helpers import parse, scrape_app, value

METRICS_TOKEN = "metrics-token-" + "m" * 40
PARENT = {"depends_on": [uuid.UUID(int=1)], "waiting_on": 1}  # waiting for one parent
# 3,000 jobs waiting for their parents, beside the backlog of the plan tests.
WAITING_ROWS_SQL = """
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts, max_attempts,
                          last_error, created_at, updated_at, depends_on, waiting_on)
    SELECT gen_random_uuid(), 'demo.t' || (g % 7), '{}', 'queued', 0, :waiting, g % 2, 3, '',
           :now, :now, ARRAY[gen_random_uuid()], 1
    FROM generate_series(1, 3000) AS g
"""


def test_queue_gauges_count_known_rows(app):
    now = utcnow()
    make_job("queued", type="mail.send", available_at=now - timedelta(seconds=90))
    make_job("queued", type="mail.send")
    make_job("queued", type="report.build", available_at=now + timedelta(hours=1))
    make_job("running", type="report.build", locked_until=now - timedelta(seconds=5))  # overdue
    make_job("running", type="mail.send")
    for _ in range(3):
        make_job("succeeded")
    make_job("failed")
    make_job("failed", cancelled_at=now, last_error="Cancelled by olga")  # not a failure
    with app.app_context():
        stats_refresh.refresh_finished_counts()
    response = scrape_app(app)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    samples = parse(response.get_data(as_text=True))
    assert value(samples, "jobqueue_jobs", status="queued") == 3
    assert value(samples, "jobqueue_jobs", status="running") == 2
    assert value(samples, "jobqueue_jobs", status="succeeded") == 3
    assert value(samples, "jobqueue_jobs", status="failed") == 1
    assert value(samples, "jobqueue_jobs", status="cancelled") == 1
    assert value(samples, "jobqueue_jobs_ready", type="mail.send") == 2
    assert value(samples, "jobqueue_jobs_ready", type="report.build") == 0
    assert value(samples, "jobqueue_jobs_scheduled", type="report.build") == 1
    assert value(samples, "jobqueue_jobs_running", type="mail.send") == 1
    assert value(samples, "jobqueue_jobs_overdue", type="report.build") == 1
    assert value(samples, "jobqueue_jobs_overdue", type="mail.send") == 0
    assert value(samples, "jobqueue_oldest_ready_age_seconds", type="mail.send") >= 90
    assert value(samples, "jobqueue_oldest_ready_age_seconds", type="report.build") is None  # none ready
    assert value(samples, "jobqueue_queue_oldest_ready_age_seconds") >= 90
    assert value(samples, "jobqueue_queue_capped", status="queued") == 0


def test_workers_alive_counts_recent_heartbeats(app):
    now = utcnow()
    assert value(parse(scrape_app(app).get_data(as_text=True)), "jobqueue_workers_alive") == 0
    beating = workers.Identity("hostA:11:aa", "hostA", 11, now, "one-job", 4, "1", 5.0, ("demo.success",))
    silent = workers.Identity("hostB:12:bb", "hostB", 12, now, "one-job", 4, "1", 5.0, ())
    workers.beat(beating, jobs_done=0, now=now)
    workers.beat(silent, jobs_done=0, now=now - timedelta(minutes=1))  # three beats missed: stale
    assert value(parse(scrape_app(app).get_data(as_text=True)), "jobqueue_workers_alive") == 1


def test_a_count_past_the_cap_is_flagged(app):
    for _ in range(3):
        make_job("queued")
    with app.app_context():
        snap = read_metrics.read_snapshot(DEFAULT_POLICY, cap=2)
    assert snap.total("ready") == 2
    assert snap.capped == {"queued": True, "running": False, "waiting": False}


def test_waiting_jobs_have_a_gauge_of_their_own_by_type(app):
    now = utcnow()
    make_job("queued", type="mail.send")
    for job_type, attempts in (("report.build", 0), ("report.build", 1), ("mail.send", 0)):
        make_job("queued", type=job_type, attempts=attempts, available_at=WAITING_AT, **PARENT)
    make_job("queued", type="report.build", available_at=now + timedelta(hours=1))
    samples = parse(scrape_app(app).get_data(as_text=True))
    assert value(samples, "jobqueue_jobs_waiting", type="report.build") == 2
    assert value(samples, "jobqueue_jobs_waiting", type="mail.send") == 1
    # the figures there before are unchanged: waiting jobs stay within queued and scheduled
    assert value(samples, "jobqueue_jobs", status="queued") == 5
    assert value(samples, "jobqueue_jobs_scheduled", type="report.build") == 3
    assert value(samples, "jobqueue_jobs_ready", type="mail.send") == 1
    assert value(samples, "jobqueue_queue_capped", status="waiting") == 0
    with app.app_context():
        snap = read_metrics.read_snapshot(DEFAULT_POLICY, cap=2)
    assert snap.total("waiting") == 2 and snap.capped["waiting"] is True


def test_one_snapshot_serves_scrapes_within_the_cache_time(app):
    state_of(app).metrics.clear()
    client = app.test_client()
    first = parse(client.get("/metrics").get_data(as_text=True))
    make_job("queued")
    second = parse(client.get("/metrics").get_data(as_text=True))
    assert (
        value(first, "jobqueue_jobs", status="queued") == value(second, "jobqueue_jobs", status="queued") == 0
    )


@pytest.mark.parametrize(
    ("statement", "index"),
    [(read_metrics.QUEUED_SQL, "job_claim_idx"), (read_metrics.RUNNING_SQL, "job_timeout_idx")],
)
def test_gauges_read_partial_indexes_with_a_limit(app, statement, index):
    """Where the cap matters (more rows than it), the gauges walk their index in order under
    the Limit. Planned on an analysed backlog of 20,000 jobs (rolled back) with a cap of 100:
    the real cap of 100,000 would need that many rows, and below the cap a bitmap scan of any
    partial index on queued rows (the overview's job_queued_type_idx) and a small sort is fine."""
    now = utcnow()
    params = {"now": now, "cap": 100}
    with app.app_context(), db.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text(WAITING_ROWS_SQL), {"now": now, "waiting": WAITING_AT})
        seed_analysed_backlog(conn, now)
        plan = "\n".join(r[0] for r in conn.execute(text("EXPLAIN " + statement.text), params))
        transaction.rollback()
    assert f"Index Scan using {index}" in plan, plan
    assert "Limit" in plan
    assert "Sort" not in plan.split("Limit")[1]  # the walk is in index order, no sort of all rows


@pytest.mark.parametrize("statement", [read_metrics.WAITING_SQL, read_stats.LIVE_STATS_SQL])
def test_the_waiting_counts_read_the_waiting_point_of_job_queued_idx_under_a_limit(app, statement):
    """The gauge's and the large table's stats' waiting counts (the overview's form) read the
    point at ``WAITING_AT`` of job_queued_idx's two ranges, never the table, and fetch at most
    the cap's rows: planned and run on an analysed backlog of 20,000 jobs beside 3,000 waiting
    ones (rolled back), with a cap of 100."""
    now = utcnow()
    with app.app_context(), db.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text(WAITING_ROWS_SQL), {"now": now, "waiting": WAITING_AT})
        seed_analysed_backlog(conn, now)
        explain = text("EXPLAIN (ANALYZE, TIMING OFF, SUMMARY OFF) " + statement.text)
        plan = "\n".join(r[0] for r in conn.execute(explain, {"now": now, "cap": 100}))
        transaction.rollback()
    lines = plan.splitlines()
    point = [n for n, line in enumerate(lines) if "available_at = '9999-12-31" in line]
    assert len(point) >= 2 and all("Cond" in lines[n] for n in point), plan
    assert "job_queued_idx" in plan and "Seq Scan on jobs_job" not in plan, plan
    # the nodes that read the point's rows from the table: at most the cap's rows each
    fetches = [lines[n - 1] for n in point if "Bitmap Index Scan" not in lines[n - 1]]
    assert fetches and all("job_queued_idx" in f or "Bitmap Heap Scan" in f for f in fetches), plan
    fetched = [int(m) for f in fetches for m in re.findall(r"actual rows=(\d+)", f)]
    assert fetched and max(fetched) <= 100, plan


def test_metrics_need_a_token_when_sign_in_is_on(app, database_url):
    with build(database_url, METRICS_TOKEN=METRICS_TOKEN) as secured:
        client = secured.test_client()
        refused = client.get("/metrics")
        assert refused.status_code == 401
        assert "Bearer" in refused.headers["WWW-Authenticate"]
        assert client.get("/metrics", headers=bearer("wrong-" + "x" * 40)).status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Basic abc"}).status_code == 401
        assert client.get("/metrics", headers=bearer(METRICS_TOKEN)).status_code == 200
        assert client.get("/metrics", headers=bearer(VIEWER_TOKEN)).status_code == 200


def test_metrics_answer_503_not_500_when_the_database_is_down(app):
    from dashboard import create_app
    from tests.conftest import TEST_CONFIG

    down = create_app({**TEST_CONFIG, "DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none"})
    response = down.test_client().get("/metrics")
    assert response.status_code == 503


def test_each_schedule_has_its_next_run_last_fire_and_run_counters(app):
    t0 = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
    tick = Declaration("tick", "* * * * *", "UTC", "demo.success", {}, "default", 50, 3)
    nightly = Declaration("nightly", "0 6 * * *", "UTC", "demo.success", {}, "default", 50, 3)
    old = Declaration("old", "0 6 * * *", "UTC", "demo.success", {}, "default", 50, 3)
    sync([tick, nightly, old], now=t0)
    sync([tick, nightly], now=t0)  # old is retired: no series
    fire_due(now=t0 + timedelta(minutes=5))  # latest: one fired, four skipped
    set_paused("nightly", True, actor="olga", now=t0)
    samples = parse(scrape_app(app).get_data(as_text=True))
    fired_at = datetime(2026, 6, 1, 12, 5, 30, tzinfo=UTC).timestamp()
    assert value(samples, "jobqueue_schedule_last_fire_timestamp_seconds", schedule="tick") == fired_at
    assert value(samples, "jobqueue_schedule_last_fire_timestamp_seconds", schedule="nightly") is None
    next_tick = datetime(2026, 6, 1, 12, 6, tzinfo=UTC).timestamp()
    assert value(samples, "jobqueue_schedule_next_run_timestamp_seconds", schedule="tick") == next_tick
    assert value(samples, "jobqueue_schedule_runs_total", schedule="tick", outcome="fired") == 1
    assert value(samples, "jobqueue_schedule_runs_total", schedule="tick", outcome="skipped") == 4
    assert value(samples, "jobqueue_schedule_paused", schedule="nightly") == 1
    assert value(samples, "jobqueue_schedule_paused", schedule="tick") == 0
    assert value(samples, "jobqueue_schedule_paused", schedule="old") is None
