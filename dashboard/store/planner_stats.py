"""Planner statistics of the two queue tables, kept from lagging far behind a burst, and the
plans of a bulk create into a small table.

Every statement that inserts events looks their jobs up in ``jobs_job`` (the trigger that keeps
an event's job reference, migration 0024; a foreign key's check did the same per event before).
PostgreSQL plans that lookup once per connection and keeps the plan until the table's statistics
change (so do the worker's statements, planned once generically). A plan made while
``jobs_job`` was a page or two and had been analyzed (a new installation, a table retention
emptied) is a sequential scan, and it stays one as a burst grows the table: every event then
reads the whole table, until autovacuum next analyzes it (within ``autovacuum_naptime``, a
minute by default). docs/benchmarks.md has the measurements ("The bulk API's slow runs,
explained").

:func:`analyze_grown` analyzes a queue table that grew more than :data:`GROWTH` times (and past
:data:`MIN_PAGES`) since its statistics were last taken (``relpages``, which VACUUM, ANALYZE and
autovacuum set), so no cached plan outlives the size it was made for by more than that. ANALYZE
samples a bounded number of rows, and makes every connection plan again. ``SKIP_LOCKED``: if
another process (or autovacuum) is analyzing the table, this one skips it, waiting for nothing.
A table the role cannot analyze (it does not own it) is left to autovacuum.

Two callers keep it so, so that neither depends on the other: each worker process's rescuer
after every rescue pass, and the process that inserts, where the burst happens
(:func:`after_insert`, from ``create.py``: a web process alone, a fresh installation importing
before any worker is deployed, must not run at a fraction of its speed). The inserting process
checks once per :data:`CHECK_EVERY_JOBS` jobs it created, one catalog query.

Before the first such check can help, the burst's own first requests plan the check while the
table is still small. So a bulk create into a table of fewer than :data:`CUSTOM_PLANS_BELOW_PAGES`
pages plans every statement of its transaction afresh (:data:`CUSTOM_PLANS_WHILE_SMALL`,
``plan_cache_mode = force_custom_plan``, transaction-local, so it also holds through a
transaction pooler): each plan then sees the table as it is, and a cached plan made for a page
or two is not used. It costs a plan per statement only while the table is that small.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection
from sqlalchemy import exc as sa_exc

from .connection import autocommit, fetch_rows
from .sql import query

log = logging.getLogger(__name__)

# ANALYZE is a utility command, not a statement of the .sql files (those begin WITH or SELECT):
# one fixed command per table, never a name interpolated from elsewhere.
ANALYZE = {
    "jobs_job": "ANALYZE (SKIP_LOCKED) jobs_job",
    "jobs_jobevent": "ANALYZE (SKIP_LOCKED) jobs_jobevent",
}
TABLES = tuple(ANALYZE)
GROWTH = 10  # times the pages of the last statistics
MIN_PAGES = 32  # 256 KB: below this a sequential scan costs little anyway
CHECK_EVERY_JOBS = 1000  # an inserting process checks for growth once per this many jobs
CUSTOM_PLANS_BELOW_PAGES = 64  # 512 KB, a couple of thousand jobs

# Run first in a bulk create's transaction (connection.fetch_rows_while(first=...)): a statement
# of no parameters, sent as its text (its 64 is CUSTOM_PLANS_BELOW_PAGES: tests/store/test_statements.py).
CUSTOM_PLANS_WHILE_SMALL = str(query("custom_plans_while_small"))
GROWN = query("grown_tables")


def grown_tables(conn: Connection | None = None) -> list[dict[str, object]]:
    """The queue tables this role may analyze whose size outgrew their statistics: each with
    ``name``, ``analyzed_pages`` (at the last statistics) and ``pages`` (now)."""
    with autocommit(conn) as conn:
        return fetch_rows(conn, GROWN, {"tables": list(TABLES), "growth": GROWTH, "min_pages": MIN_PAGES})


def analyze_grown(conn: Connection | None = None) -> list[dict[str, object]]:
    """ANALYZE each table :func:`grown_tables` names; returns those rows (usually none)."""
    with autocommit(conn) as conn:
        grown = grown_tables(conn)
        for row in grown:
            command = ANALYZE.get(str(row["name"]))
            if command is not None:
                conn.exec_driver_sql(command)
        return grown


_created_since_check = [0]  # jobs this process created since it last checked (races only miscount)


def after_insert(count: int, conn: Connection | None) -> list[dict[str, object]]:
    """Note ``count`` jobs created on ``conn`` (autocommit, the create committed; ``None``: a
    pooled connection of its own, for jobs created in a caller's transaction); once
    :data:`CHECK_EVERY_JOBS` have been since the last check, :func:`analyze_grown`. Returns the
    tables analyzed. A database error here is logged and left to the next check (and to
    autovacuum): the create itself has succeeded."""
    _created_since_check[0] += count
    if _created_since_check[0] < CHECK_EVERY_JOBS:
        return []
    _created_since_check[0] = 0
    try:
        grown = analyze_grown(conn)
    except sa_exc.SQLAlchemyError as error:
        log.warning("could not check the planner statistics of the queue tables: %s", type(error).__name__)
        return []
    for row in grown:
        log.info(
            "%s grew from %s to %s pages since its planner statistics: ANALYZE (SKIP_LOCKED) sent",
            row["name"],
            row["analyzed_pages"],
            row["pages"],
        )
    return grown
