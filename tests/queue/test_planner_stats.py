"""A queue table that outgrew its planner statistics is analyzed, so no connection keeps
running on plans made for a page or two (the events' foreign-key check scanned the whole
table per event; docs/benchmarks.md, issue 20, round five)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy import Connection, text

from dashboard.runtime.rescuer import refresh_statistics
from dashboard.runtime.threads import ThreadRuntime
from dashboard.store import connection, planner_stats, service
from dashboard.store.service import JobSpec

from ..worker.helpers import SETTINGS


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


def create(count: int, prefix: str, conn: Connection | None = None) -> None:
    specs = [JobSpec("demo.success", {"i": i}, idempotency_key=f"{prefix}-{i}") for i in range(count)]
    service.create_jobs(specs, conn=conn)


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


def test_a_table_that_outgrew_its_statistics_is_analyzed(app):
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


def test_growth_below_the_floor_or_the_factor_analyzes_nothing(app):
    create(10, "small")
    analyze_now()
    create(200, "some")  # a few pages: under MIN_PAGES
    assert planner_stats.grown_tables() == []
    create(3000, "more")
    analyze_now()
    create(500, "less-than-tenfold")
    assert planner_stats.grown_tables() == []


def test_a_connection_planned_on_a_tiny_table_plans_again_after_the_analyze(app):
    """The failure itself: a connection whose first event was written while ``jobs_job`` was a
    page (and analyzed) checks every later event's job with a sequential scan, until the
    statistics change; the rescuer's tick changes them."""
    create(10, "small")
    analyze_now()
    with connection.connect() as conn:
        create(10, "plans-here", conn)  # the foreign-key check is planned on a one-page table
        before = own_seq_scans(conn)
        create(2000, "burst", conn)
        assert own_seq_scans(conn) - before >= 2000  # one whole-table read per event

        runtime = ThreadRuntime(app, SETTINGS, "rescuer-test", threading.Event())
        with runtime.holding_connection():
            assert "jobs_job" in [row["name"] for row in refresh_statistics(runtime)]
        before = own_seq_scans(conn)
        create(2000, "after", conn)
        assert own_seq_scans(conn) - before < 100  # not one per event (at most another's late report)
