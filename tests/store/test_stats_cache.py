"""Stats on a large table: live figures exact, finished totals cached with their age."""

from __future__ import annotations

import uuid
from datetime import timedelta

from dashboard.extensions import db
from dashboard.ops import recount
from dashboard.state import state_of
from dashboard.store import values
from dashboard.store.reads import lists as find_jobs
from dashboard.store.reads import stats as read_stats
from dashboard.store.reads import stats_refresh
from dashboard.store.reads.stats import StatsPolicy
from dashboard.store.states import WAITING_AT
from tests.support.factories import make_job
from tests.support.waiting import wait_until

CACHED = StatsPolicy(exact_below_rows=0, refresh_seconds=3600)


def test_live_figures_are_exact_and_finished_ones_come_from_the_last_count(app):
    make_job("succeeded")
    make_job("failed")
    assert stats_refresh.refresh_finished_counts() is True
    counted = read_stats.stats(values.utcnow(), CACHED)
    assert counted.by_status == {"queued": 0, "running": 0, "succeeded": 1, "failed": 1}
    assert counted.finished_counted_at is not None

    make_job("queued", attempts=1)
    make_job("running")
    make_job("succeeded")  # not counted until the next refresh
    now = values.utcnow()
    stale = read_stats.stats(now, CACHED)
    assert stale.by_status == {"queued": 1, "running": 1, "succeeded": 1, "failed": 1}
    assert stale.total == 4 and stale.retries_pending == 1
    assert stale.finished_counted_at == counted.finished_counted_at

    stats_refresh.refresh_finished_counts()
    fresh = read_stats.stats(values.utcnow(), CACHED)
    assert fresh.by_status["succeeded"] == 2 and fresh.total == 5
    assert fresh.finished_counted_at > counted.finished_counted_at


def test_waiting_jobs_are_counted_apart_within_queued_on_both_paths(app):
    make_job("queued")
    for attempts in (0, 1):  # a dependent waiting anew, and one retried before it waited again
        make_job(
            "queued", available_at=WAITING_AT, attempts=attempts, depends_on=[uuid.uuid4()], waiting_on=1
        )
    make_job("queued", attempts=1, available_at=values.utcnow() + timedelta(hours=1))  # a retry, due later
    for policy in (CACHED, read_stats.DEFAULT_POLICY):  # the large table's capped walks, the exact pass
        stats = read_stats.stats(values.utcnow(), policy)
        assert (stats.by_status["queued"], stats.waiting, stats.retries_pending) == (4, 2, 2), policy
        assert stats.as_dict()["waiting"] == 2


def test_a_waiting_count_past_the_cap_is_the_planners_estimate(app, monkeypatch):
    for _ in range(3):
        make_job("queued", available_at=WAITING_AT, depends_on=[uuid.uuid4()], waiting_on=1)
    monkeypatch.setattr(read_stats, "LIVE_COUNT_CAP", 2)
    capped = read_stats.stats(values.utcnow(), CACHED)
    assert capped.counts_capped is True and capped.waiting >= 3  # the walk's 3, or more by EXPLAIN
    monkeypatch.setattr(read_stats, "LIVE_COUNT_CAP", 3)
    exact = read_stats.stats(values.utcnow(), CACHED)
    assert exact.counts_capped is False and exact.waiting == 3


def test_an_old_count_is_refreshed_in_the_background(app):
    stats_refresh.refresh_finished_counts()
    before = read_stats.stats(values.utcnow(), CACHED).finished_counted_at
    make_job("failed")
    eager = StatsPolicy(exact_below_rows=0, refresh_seconds=0, on_stale=recount.recount_in_background)
    read_stats.stats(values.utcnow(), eager)  # answers at once with the old count, starts a refresh

    def refreshed():
        stats = read_stats.stats(values.utcnow(), CACHED)
        return stats if stats.finished_counted_at > before else None

    assert wait_until(refreshed, 15, "a background recount").by_status["failed"] == 1


def test_small_tables_are_counted_exactly(app):
    make_job("succeeded")
    stats = read_stats.stats(values.utcnow())  # the default policy: 100,000 rows
    assert stats.by_status["succeeded"] == 1 and stats.finished_counted_at is None


def test_job_list_count_on_a_large_table_is_a_capped_count_not_the_stats_figures(app, monkeypatch):
    import dataclasses

    make_job("succeeded")
    make_job("queued")
    stats_refresh.refresh_finished_counts()
    make_job("succeeded")  # after the recount: the list still counts it (it reads no stats)
    settings = state_of(app).settings
    large = recount.policy_of(dataclasses.replace(settings, stats_exact_below_rows=0))
    monkeypatch.setattr(read_stats, "large_table_stats", None)  # a list never computes them
    page = find_jobs.list_jobs(limit=10, offset=0, policy=large)
    assert (page.count, page.count_exact, len(page.results)) == (3, True, 3)
    assert find_jobs.list_jobs(limit=10, offset=0, status="queued", policy=large).count == 1
    assert find_jobs.list_jobs(limit=10, offset=0, status="succeeded", policy=large).count == 2
    monkeypatch.setattr(find_jobs, "FILTERED_COUNT_CAP", 1)
    capped = find_jobs.list_jobs(limit=10, offset=0, status="succeeded", policy=large)
    assert capped.count_exact is False and len(capped.results) == 2


def test_type_filtered_count_on_a_large_table_is_exact_up_to_the_cap_then_estimated(app, monkeypatch):
    import dataclasses

    for _ in range(4):
        make_job("queued", type="mail.send")
    make_job("failed", type="report.build")
    settings = state_of(app).settings
    large = recount.policy_of(dataclasses.replace(settings, stats_exact_below_rows=0))
    exact = find_jobs.list_jobs(limit=2, offset=0, type="MAIL", policy=large)
    assert (exact.count, exact.count_exact, len(exact.results)) == (4, True, 2)
    monkeypatch.setattr(find_jobs, "FILTERED_COUNT_CAP", 2)
    estimated = find_jobs.list_jobs(limit=2, offset=0, type="mail", policy=large)
    assert estimated.count_exact is False
    assert estimated.count >= 3  # never fewer than the rows it did count
    rare = find_jobs.list_jobs(limit=2, offset=0, status="failed", type="report", policy=large)
    assert (rare.count, rare.count_exact) == (1, True)


def test_the_type_filter_resolves_to_the_types_containing_it(app):
    for job_type in ("demo.success", "Demo.Slow", "mail.send", "a_b", "axb"):
        make_job("queued", type=job_type)
    with db.engine.connect() as conn:
        assert set(find_jobs.types_matching(conn, "DEMO")) == {"Demo.Slow", "demo.success"}
        assert find_jobs.types_matching(conn, "a_b") == ["a_b"]  # no LIKE wildcards
        assert find_jobs.types_matching(conn, "nothing") == []
    assert find_jobs.list_jobs(limit=10, offset=0, type="nothing").count == 0
