"""Read connections for the pages and the API, under an optional statement timeout, on the
primary or (inside :func:`replica_reads`) on a replica that keeps up (``replica.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import psycopg
from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from ..extensions import engine
from .replica import Replica, Source, Why
from .sql import query

TIME_LIMIT = query("read_time_limit")

_time_limit_ms: ContextVar[int | None] = ContextVar("read_time_limit_ms", default=None)


@dataclass
class _Route:
    replica: Replica
    source: Source


_route: ContextVar[_Route | None] = ContextVar("read_route", default=None)


class QueryTimeout(RuntimeError):
    """A read ran past the time limit of :func:`time_limit` and was cancelled."""


@contextmanager
def time_limit(milliseconds: int | None) -> Iterator[None]:
    """Run the reads inside with ``statement_timeout``: a slow query fails, fast.

    The dashboard reads each panel under a limit, so a query that a huge table makes slow
    costs one panel (:class:`QueryTimeout`), not the whole page or a stuck web worker.
    """
    token = _time_limit_ms.set(milliseconds)
    try:
        yield
    finally:
        _time_limit_ms.reset(token)


@contextmanager
def replica_reads(replica: Replica | None, wrote_at: float | None = None) -> Iterator[Source | None]:
    """Run the reads inside on ``replica`` while :meth:`Replica.choose` allows (else on the
    primary); yields where they go (``None`` without a replica), and :func:`read_source` says
    it inside, updated if the replica fails to connect meanwhile. Only for reads of
    lists, counts and charts: a write inside still goes to the primary (it takes its own
    connection, never :func:`reading`'s)."""
    if replica is None:
        yield None
        return
    route = _Route(replica, replica.choose(wrote_at))
    token = _route.set(route)
    try:
        yield route.source
    finally:
        _route.reset(token)


def read_source() -> Source | None:
    """Where the reads of the current :func:`replica_reads` block went (``None`` outside one)."""
    route = _route.get()
    return route.source if route is not None else None


def _connect() -> Connection:
    """A read connection: the replica's inside :func:`replica_reads` when it was chosen and
    connects, else the primary's. A replica that fails to connect is marked down and the read
    goes to the primary."""
    route = _route.get()
    if route is not None and route.source.replica:
        try:
            return route.replica.engine.connect()
        except SQLAlchemyError as error:
            route.replica.failed(error)
            route.source = Source(Why.DOWN, None, route.source.max_lag_seconds)
    return engine().connect()


@contextmanager
def reading() -> Iterator[Connection]:
    with _connect() as conn:
        limit = _time_limit_ms.get()
        if limit:  # this read's transaction only, never a pooled connection's default
            conn.execute(TIME_LIMIT, {"milliseconds": str(int(limit))})
        try:
            yield conn
        except OperationalError as error:
            if isinstance(error.orig, psycopg.errors.QueryCanceled):
                raise QueryTimeout(f"query cancelled after {limit} ms") from error
            raise


@contextmanager
def in_index_order(conn: Connection) -> Iterator[None]:
    """Inside :func:`reading`: plan the statements run inside without bitmap scans.

    For capped counts (``SELECT count(*) FROM (... ORDER BY available_at LIMIT :cap)``) whose
    range is a correlated value (a type or a queue of an array): the planner estimates such a
    range at a column average, below the cap, and prefers a bitmap scan that reads the whole
    range (500,000 entries for a burst) before the cap stops it; walked in index order, the
    cap stops the read. ``SET LOCAL``: this transaction only, and reset after (to the
    session's own value) for the statements that follow in it.
    """
    conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
    yield
    conn.exec_driver_sql("RESET enable_bitmapscan")


@contextmanager
def in_range_order(conn: Connection) -> Iterator[None]:
    """Inside :func:`reading`: plan the statements run inside as if a row fetched through an
    index cost what a row read in table order does (``random_page_cost`` = ``seq_page_cost``).

    For a read of one group's rows in index order, with their columns from the table: a
    payload search's newest-first ranges of job_type_created_idx, one job's events through
    job_event_job_id_idx. Costing those fetches as random reads, the planner prefers walking
    the whole list's order index (the created_at index backwards, job_event_id_idx) and
    filtering, as if the group's rows were spread evenly through it; a recent burst of other
    jobs at its head (500,000 of them), or a long job's events at the end of the feed, is read
    row by row before the group's first (the figures: docs/benchmarks.md). The
    pages' working set is cached, so the setting is also closer to the truth. ``SET LOCAL``
    and reset after, as :func:`in_index_order`.
    """
    conn.exec_driver_sql("SET LOCAL random_page_cost = 1")
    yield
    conn.exec_driver_sql("RESET random_page_cost")


@contextmanager
def through_an_index(conn: Connection) -> Iterator[None]:
    """Inside :func:`reading`: plan the statements run inside with neither bitmap nor
    sequential scans, so a capped count (``SELECT count(*) FROM (... LIMIT :cap)``) walks an
    index range and stops at its cap.

    Left to itself the planner counts a common filter (every queued job, every failure) with
    a bitmap scan, which reads every entry of the range, dead ones included, and the table
    pages they point to before the limit stops it; or with a sequential scan that expects the
    matches spread evenly through the table and reads it until it has found them (the rows of
    a backlog touched since the last VACUUM sit at its end). A filter that no index serves
    still gets a sequential scan. ``SET LOCAL`` and reset after, as :func:`in_index_order`.
    Figures: docs/performance.md.
    """
    conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off")
    yield
    conn.exec_driver_sql("RESET enable_bitmapscan; RESET enable_seqscan")
