"""Planner statistics of the two queue tables, kept from lagging far behind a burst.

Every event's foreign-key check looks its job up in ``jobs_job``. PostgreSQL plans that lookup
once per connection and keeps the plan until the table's statistics change (so do the worker's
statements, planned once generically). A plan made while ``jobs_job`` was a page or two and
had been analyzed (a new installation, a table retention emptied) is a sequential scan, and
it stays one as a burst grows the table: every event then reads the whole table, until
autovacuum next analyzes it (within ``autovacuum_naptime``, a minute by default).
docs/benchmarks.md (issue 20, round five) has the measurements.

:func:`analyze_grown` analyzes a queue table that grew more than :data:`GROWTH` times (and past
:data:`MIN_PAGES`) since its statistics were last taken (``relpages``, which VACUUM, ANALYZE and
autovacuum set), so no cached plan outlives the size it was made for by more than that. ANALYZE
samples a bounded number of rows, and makes every connection plan again. ``SKIP_LOCKED``: if
another process (or autovacuum) is analyzing the table, this one skips it, waiting for nothing.
A table the role cannot analyze (it does not own it) is left to autovacuum.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from .connection import autocommit, fetch_rows

TABLES = ("jobs_job", "jobs_jobevent")
GROWTH = 10  # times the pages of the last statistics
MIN_PAGES = 32  # 256 KB: below this a sequential scan costs little anyway

GROWN = text(
    """
    SELECT c.relname AS name, c.relpages AS analyzed_pages,
           pg_relation_size(c.oid) / current_setting('block_size')::bigint AS pages
    FROM pg_class AS c
    WHERE c.oid = ANY(CAST(:tables AS regclass[]))
      AND pg_has_role(c.relowner, 'USAGE')
      AND pg_relation_size(c.oid) / current_setting('block_size')::bigint
          > greatest(:growth * c.relpages, :min_pages)
    ORDER BY c.relname
    """
)


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
            name = str(row["name"])
            if name in TABLES:  # a fixed name, never interpolated from elsewhere
                conn.exec_driver_sql(f"ANALYZE (SKIP_LOCKED) {name}")
        return grown
