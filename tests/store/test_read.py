"""Reads: limit-offset job lists, the cursor-positioned event feed, stats."""

from __future__ import annotations

from datetime import timedelta

from dashboard.store import reading
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.reads import stats as read_stats
from tests.support.factories import make_job

from .helpers import T0, at, claim


def test_job_list_limit_offset_newest_first(app):
    ids = [enqueue.create_job(enqueue.JobSpec("demo.success"), now=at(i)).job.id for i in range(7)]
    page1 = find_jobs.list_jobs(limit=3, offset=0)
    page3 = find_jobs.list_jobs(limit=3, offset=6)
    assert page1.count == 7
    assert [j.id for j in page1.results] == ids[::-1][:3]
    assert [j.id for j in page3.results] == [ids[0]]


def test_job_list_filters_status_exactly_and_type_by_substring(app):
    enqueue.create_job(enqueue.JobSpec("demo.success"), now=T0)
    enqueue.create_job(enqueue.JobSpec("Demo.Slow"), now=T0)
    enqueue.create_job(enqueue.JobSpec("mail.send"), now=T0)
    make_job("failed", type="demo.fail")
    assert find_jobs.list_jobs(limit=10, offset=0, type="DEMO").count == 3
    assert find_jobs.list_jobs(limit=10, offset=0, status="queued", type="demo").count == 2
    assert find_jobs.list_jobs(limit=10, offset=0, status="failed").count == 1
    # LIKE wildcards in the filter are literal characters
    assert find_jobs.list_jobs(limit=10, offset=0, type="%").count == 0
    assert find_jobs.list_jobs(limit=10, offset=0, type="_").count == 0


def test_event_feed_walk_visits_each_older_event_once_while_new_ones_arrive(app):
    for i in range(10):
        enqueue.create_job(enqueue.JobSpec("demo.success"), now=at(i))
    seen: list[int] = []
    page = read_jobs.list_events(limit=3)
    while True:
        seen.extend(e.id for e in page.results)
        enqueue.create_job(enqueue.JobSpec("demo.success"), now=at(100))  # new events between pages
        if not page.has_older:
            break
        page = read_jobs.list_events(limit=3, before=page.results[-1].id)
    assert seen == list(range(10, 0, -1))


def test_event_feed_previous_page_and_filters(app):
    jobs = [enqueue.create_job(enqueue.JobSpec("demo.success"), now=T0).job for _ in range(3)]
    claim("w", now=at(1))
    newer = read_jobs.list_events(limit=2, after=1)
    assert [e.id for e in newer.results] == [3, 2] and newer.has_newer is True
    only_claimed = read_jobs.list_events(limit=10, type="claimed")
    assert [e.type for e in only_claimed.results] == ["claimed"]
    for_job = read_jobs.list_events(limit=10, job_id=jobs[1].id)
    assert {e.job_id for e in for_job.results} == {jobs[1].id}


def test_stats(app):
    assert read_stats.stats(T0).as_dict() == {
        "total": 0,
        "by_status": {"queued": 0, "running": 0, "succeeded": 0, "failed": 0},
        "overdue_running": 0,
        "retries_pending": 0,
        "oldest_queued_at": None,
        "waiting": 0,
    }
    oldest = make_job("queued", created_at=at(-100))
    make_job("queued", attempts=1, created_at=at(-50))
    make_job("running", locked_until=at(-1))
    make_job("running", locked_until=at(60))
    make_job("succeeded")
    make_job("failed")
    stats = read_stats.stats(T0)
    assert stats.total == 6
    assert stats.by_status == {"queued": 2, "running": 2, "succeeded": 1, "failed": 1}
    assert stats.overdue_running == 1
    assert stats.retries_pending == 1 and stats.waiting == 0
    assert stats.oldest_queued_at == oldest.created_at == T0 - timedelta(seconds=100)


def test_time_limit_cancels_a_slow_read_and_leaves_the_pool_clean(app):
    import pytest
    from sqlalchemy import text

    from dashboard.extensions import db

    with (
        reading.time_limit(50),
        pytest.raises(reading.QueryTimeout),
        reading.reading() as conn,
    ):
        conn.execute(text("SELECT pg_sleep(2)"))
    with reading.reading() as conn:  # no limit outside: SET LOCAL ended with that transaction
        assert conn.execute(text("SHOW statement_timeout")).scalar_one() == "0"
    with db.engine.connect() as conn:
        assert conn.execute(text("SHOW statement_timeout")).scalar_one() == "0"


def test_a_type_filter_with_many_matches_merges_per_type_and_status_ranges(app, monkeypatch):
    """Past the small-count path, a type-filtered page is merged from one index range per
    (type, status): the same rows, in the same order, for offsets and keyset positions."""
    monkeypatch.setattr(find_jobs, "FILTERED_COUNT_CAP", 2)
    made = []
    for i in range(12):
        job_type = ("demo.success", "demo.slow", "mail.send")[i % 3]
        status = ("queued", "failed", "succeeded")[i % 4 % 3]
        made.append(make_job(status, type=job_type, now=at(i)))
    expected = [
        j.id for j in sorted(made, key=lambda j: (j.created_at, j.id), reverse=True) if "demo" in j.type
    ]
    first = find_jobs.list_jobs(limit=3, offset=0, type="demo")
    assert first.count == 8
    assert [j.id for j in first.results] == expected[:3]
    assert [j.id for j in find_jobs.list_jobs(limit=3, offset=3, type="demo").results] == expected[3:6]
    anchor = first.results[-1]
    older = find_jobs.list_jobs(limit=3, offset=0, type="demo", before=(anchor.created_at, anchor.id))
    assert [j.id for j in older.results] == expected[3:6]
    last = older.results[0]
    newer = find_jobs.list_jobs(limit=2, offset=0, type="demo", after=(last.created_at, last.id))
    assert [j.id for j in newer.results] == expected[1:3]
    failed = [i for i in expected if next(j for j in made if j.id == i).status == "failed"]
    page = find_jobs.list_jobs(limit=10, offset=0, type="demo", status="failed")
    assert [j.id for j in page.results] == failed


def test_a_named_queue_with_many_matches_merges_per_status_ranges(app, monkeypatch):
    """Past the small-count path, a named queue's page is merged from one range of
    job_queue_created_idx per status: the same rows, in the same order, as the table's order."""
    monkeypatch.setattr(find_jobs, "FILTERED_COUNT_CAP", 2)
    made = []
    for i in range(12):
        status = ("queued", "failed", "succeeded", "running")[i % 4]
        made.append(make_job(status, queue=("mail", "default", "reports")[i % 3], now=at(i)))
    newest = sorted(made, key=lambda j: (j.created_at, j.id), reverse=True)
    expected = [j.id for j in newest if j.queue == "mail"]
    first = find_jobs.list_jobs(limit=2, offset=0, queue="mail")
    assert first.count == 4 and [j.id for j in first.results] == expected[:2]
    assert [j.id for j in find_jobs.list_jobs(limit=2, offset=2, queue="mail").results] == expected[2:]
    anchor = first.results[-1]
    older = find_jobs.list_jobs(limit=5, offset=0, queue="mail", before=(anchor.created_at, anchor.id))
    assert [j.id for j in older.results] == expected[2:]
    queued = [j.id for j in newest if j.queue == "mail" and j.status == "queued"]
    assert [
        j.id for j in find_jobs.list_jobs(limit=5, offset=0, queue="mail", status="queued").results
    ] == queued


def test_a_status_filter_merges_per_type_ranges_and_keeps_the_cancelled_filter(app):
    """A status filter without a type reads one range per (type, status): the newest of that
    status, cancelled ones left out or kept alone as asked, in the table's order."""
    made = []
    for i in range(9):
        fields = {"cancelled_at": at(i)} if i % 3 == 0 else {}
        made.append(make_job("failed", type=("a.x", "b.y")[i % 2], now=at(i), **fields))
    made.append(make_job("succeeded", type="a.x", now=at(20)))
    newest = sorted(made, key=lambda j: (j.created_at, j.id), reverse=True)
    failed = [j.id for j in newest if j.status == "failed"]
    assert [j.id for j in find_jobs.list_jobs(limit=20, offset=0, status="failed").results] == failed
    kept = [j.id for j in newest if j.status == "failed" and j.cancelled_at is None]
    page = find_jobs.list_jobs(limit=20, offset=0, status="failed", cancelled=False)
    assert [j.id for j in page.results] == kept and page.count == 6
    second = find_jobs.list_jobs(limit=2, offset=2, status="failed", cancelled=False)
    assert [j.id for j in second.results] == kept[2:4]


def test_in_index_order_plans_without_bitmap_scans_only_inside(app):
    from sqlalchemy import text

    from dashboard.extensions import db

    with reading.reading() as conn:
        with reading.in_index_order(conn):
            assert conn.execute(text("SHOW enable_bitmapscan")).scalar_one() == "off"
        assert conn.execute(text("SHOW enable_bitmapscan")).scalar_one() == "on"  # the rest of the read
    with db.engine.connect() as conn:
        assert conn.execute(text("SHOW enable_bitmapscan")).scalar_one() == "on"


def test_in_range_order_costs_an_index_fetch_as_a_read_in_order_only_inside(app):
    from sqlalchemy import text

    from dashboard.extensions import db

    with db.engine.connect() as conn:
        default = conn.execute(text("SHOW random_page_cost")).scalar_one()
    assert default != "1"
    with reading.reading() as conn:
        with reading.in_range_order(conn):
            assert conn.execute(text("SHOW random_page_cost")).scalar_one() == "1"
        assert conn.execute(text("SHOW random_page_cost")).scalar_one() == default  # the rest of the read
    with db.engine.connect() as conn:
        assert conn.execute(text("SHOW random_page_cost")).scalar_one() == default
