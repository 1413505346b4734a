"""A queue table that outgrew its planner statistics is analyzed, so no connection keeps
running on plans made for a page or two (the events' job check, once the foreign key, scanned
the whole table per event; docs/benchmarks.md, "The bulk API's slow runs, explained")."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy import Connection, text

from dashboard.runtime.rescuer import refresh_statistics
from dashboard.runtime.threads import ThreadRuntime
from dashboard.store import connection, planner_stats
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import CREATE_CHUNK, JobSpec
from tests.support.worker_loop import SETTINGS


@pytest.fixture(autouse=True)
def no_autovacuum(app: Flask) -> Iterator[None]:
    """Autovacuum may analyze the tables at any moment of a test (it would do the rescuer's
    work, or undo the one-page statistics a test sets up): off for these tests only."""
    with connection.connect() as conn:
        for table in planner_stats.TABLES:
            conn.exec_driver_sql(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    try:
        yield
    finally:
        with connection.connect() as conn:
            for table in planner_stats.TABLES:
                conn.exec_driver_sql(f"ALTER TABLE {table} RESET (autovacuum_enabled)")


@pytest.fixture
def inserts_leave_the_plans_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inserting process neither analyzes nor plans afresh (the state a burst meets
    without those remedies): for the tests of the rescuer's remedy and of the failure itself."""
    monkeypatch.setattr(planner_stats, "CHECK_EVERY_JOBS", 10**9, raising=False)
    monkeypatch.setattr(planner_stats, "CUSTOM_PLANS_WHILE_SMALL", "SELECT 1", raising=False)


def create(count: int, prefix: str, conn: Connection | None = None) -> None:
    specs = [JobSpec("demo.success", {"i": i}, idempotency_key=f"{prefix}-{i}") for i in range(count)]
    enqueue.create_jobs(specs, conn=conn)


def analyze_now() -> None:
    with connection.connect() as conn:
        conn.exec_driver_sql("ANALYZE jobs_job, jobs_jobevent")


def relpages() -> int:
    with connection.connect() as conn:
        return conn.execute(text("SELECT relpages FROM pg_class WHERE relname = 'jobs_job'")).scalar_one()


def own_seq_scans(conn: Connection) -> int:
    """Sequential scans of ``jobs_job`` so far, with this connection's own counted (flushed).
    The figure is every connection's: another one may report its own a few seconds late."""
    conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")  # flushed as the backend goes idle
    conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
    scans = conn.exec_driver_sql("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'jobs_job'")
    return int(scans.scalar_one())


def test_a_table_that_outgrew_its_statistics_is_analyzed(app, inserts_leave_the_plans_alone):
    create(10, "small")
    analyze_now()  # statistics of a one-page table
    assert planner_stats.grown_tables() == []
    create(3000, "burst")
    grown = {row["name"]: row for row in planner_stats.grown_tables()}
    assert grown["jobs_job"]["analyzed_pages"] == relpages() <= 1
    assert grown["jobs_job"]["pages"] > planner_stats.MIN_PAGES

    assert "jobs_job" in [row["name"] for row in planner_stats.analyze_grown()]
    assert relpages() > planner_stats.MIN_PAGES  # its statistics now say how big it is
    assert "jobs_job" not in [row["name"] for row in planner_stats.grown_tables()]
    assert "jobs_job" not in [row["name"] for row in planner_stats.analyze_grown()]  # not again


def test_growth_below_the_floor_or_the_factor_analyzes_nothing(app, inserts_leave_the_plans_alone):
    create(10, "small")
    analyze_now()
    create(200, "some")  # a few pages: under MIN_PAGES
    assert planner_stats.grown_tables() == []
    create(3000, "more")
    analyze_now()
    create(500, "less-than-tenfold")
    assert planner_stats.grown_tables() == []


def test_a_connection_planned_on_a_tiny_table_plans_again_after_the_analyze(
    app, inserts_leave_the_plans_alone
):
    """The failure itself: a connection whose first events were checked while ``jobs_job`` was
    a page (and analyzed) looks their jobs up with sequential scans, until the statistics
    change; the rescuer's tick changes them."""
    create(10, "small")
    analyze_now()
    with connection.connect() as conn:
        create(10, "plans-here", conn)  # the events' job check is planned on a one-page table
        before = own_seq_scans(conn)
        create(2000, "burst", conn)
        # a whole-table read per event of the first statement at least (later ones may be
        # planned again for the table as it has grown)
        assert own_seq_scans(conn) - before >= CREATE_CHUNK

        runtime = ThreadRuntime(app, SETTINGS, "rescuer-test", threading.Event())
        with runtime.holding_connection():
            assert "jobs_job" in [row["name"] for row in refresh_statistics(runtime)]
        before = own_seq_scans(conn)
        create(2000, "after", conn)
        assert own_seq_scans(conn) - before < 100  # not one per event (at most another's late report)


@pytest.fixture
def no_check_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process has created no job since its last growth check (earlier tests' creates
    must not decide when the next one comes)."""
    monkeypatch.setattr(planner_stats, "_created_since_check", [0], raising=False)


def empty_and_analyzed() -> None:
    with connection.connect() as conn:
        conn.exec_driver_sql("VACUUM ANALYZE jobs_job, jobs_jobevent")


def plan_on_a_tiny_table(conn: Connection) -> None:
    """Single creates on ``conn`` while ``jobs_job`` is a page: its events' job check's cached
    plan is a sequential scan."""
    for n in range(10):
        enqueue.create_job(enqueue.JobSpec("demo.success", {"n": n}), conn=conn)


def test_a_bulk_create_into_a_small_table_plans_the_check_afresh(app, no_check_yet):
    """The first requests of a burst, before any statistics can change: the bulk create's
    statements are planned for the table as it is, so a cached plan made for a page is not
    used (one whole-table read per event)."""
    empty_and_analyzed()
    with connection.connect() as conn:
        plan_on_a_tiny_table(conn)
        before = own_seq_scans(conn)
        create(900, "burst", conn)  # 4 statements, 900 events, one transaction; no check yet
        scans = own_seq_scans(conn) - before
        assert relpages() <= 1  # no ANALYZE helped: the statistics still say a page
    # Not one per event: at most the first statement's, while the table is a few pages (where
    # a sequential scan is the cheaper plan anyway).
    assert scans <= CREATE_CHUNK


def test_a_web_process_analyzes_the_table_its_burst_outgrew(app, no_check_yet):
    """No worker, so no rescuer: the inserting process checks the statistics itself, once per
    CHECK_EVERY_JOBS jobs, and analyzes the table that outgrew them."""
    empty_and_analyzed()
    with connection.connect() as conn:
        plan_on_a_tiny_table(conn)
        for n in range(4):
            create(1000, f"burst-{n}", conn)
        assert relpages() > planner_stats.MIN_PAGES  # analyzed by the inserting process
        before = own_seq_scans(conn)
        create(2000, "after", conn)  # past the custom-plan size: on the plan made after the ANALYZE
        assert own_seq_scans(conn) - before < 100


def test_the_check_runs_once_per_so_many_jobs(app, no_check_yet, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(planner_stats, "analyze_grown", lambda conn=None: calls.append(1) or [])
    create(planner_stats.CHECK_EVERY_JOBS - 1, "almost")
    assert calls == []
    enqueue.create_job(enqueue.JobSpec("demo.success"))
    assert calls == [1]
    create(10, "again")
    assert calls == [1]
