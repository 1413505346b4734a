"""The error arm of a search: which jobs' ``last_error`` holds the words of ``q``.

Two reads, one answer (the jobs whose error the index's expression matches):

- :func:`indexed`: ``job_error_fts_idx``, a GIN over the error with its ASCII punctuation
  turned into separators (:data:`ERROR_VECTOR`), partial on ``last_error <> ''``. It finds every
  match at once, in the table's order: a word in a million errors is a bitmap of a million
  entries before a page can pick its newest (docs/benchmarks.md), and past ``cap`` it keeps the first
  the index gives, not the newest.
- :func:`newest`: the newest errors, read in the list's order through
  ``job_error_created_idx`` ((created_at, id) of the jobs with an error), each tested with the
  list's filters, stopped once it has what the page needs. The newest matches of a common word
  are among the newest errors, so this is a short read, and it is bounded: at most
  :data:`WALK_ROWS` errored jobs per walk. A word with fewer matches than the page needs among
  them is rare there, and so cheap for the GIN: :func:`newest` says ``None`` and the caller
  asks :func:`indexed`.

A walk tests each error with a case-insensitive substring test of every ASCII part of the words
first (every lexeme of the error is a lower-cased run of its letters and digits, so a match
contains each part; the test only skips the dearer one), then with the GIN's own expression.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnClause,
    ColumnElement,
    Connection,
    Select,
    func,
    literal_column,
    select,
    text,
    tuple_,
)
from sqlalchemy.sql.util import ClauseAdapter

from ..models import ERROR_VECTOR_SQL
from .columns import Keyset, jobs
from .search import Terms, error_parts

WALK_ROWS = 10_000  # errored jobs one walk reads at most
COUNTED = 1_000  # matches a walk from the newest counts at most: past them, "at least"

# The error text as job_error_fts_idx holds it (models.ERROR_VECTOR_SQL), and the predicate of
# that index and of job_error_created_idx: SQL text, not bound parameters, so that the planner
# matches the indexes' expression and predicate whatever plan it caches. Unqualified, so it
# reads the ``last_error`` of whatever one table or subquery the statement reads.
ERROR_VECTOR: ColumnClause[Any] = literal_column(ERROR_VECTOR_SQL)
HAS_ERROR = text("last_error <> ''")


@dataclass(frozen=True)
class Walked:
    """What :func:`newest` found: ``keys`` ((created_at, id) of matches) hold the page's rows
    (every match when ``complete``); ``counted`` matches were seen, a lower bound of their
    number; ``complete``: every errored job was read, so ``counted`` is their number."""

    keys: list[Keyset]
    counted: int
    complete: bool


# The builders below assemble SQLAlchemy Core: their keys are ``terms.error_query`` (the error
# words of ``q``, search.parse_q, bound as a parameter) and the job list's filters (lists.filters).
def matches(terms: Terms) -> ColumnElement[bool]:
    """The index's expression against ``terms.error_query`` (``to_tsquery('simple', ...)``)."""
    tsquery = func.to_tsquery(literal_column("'simple'::regconfig"), terms.error_query)
    return ERROR_VECTOR.op("@@")(tsquery)


def indexed(terms: Terms, where: list[ColumnElement[bool]], cap: int) -> Select[Any]:
    """(id, created_at) of at most ``cap`` matches among the jobs ``where`` selects, through
    job_error_fts_idx, in the index's order. Any status: a job backing off has its error too."""
    return select(jobs.c.id, jobs.c.created_at).where(HAS_ERROR, matches(terms), *where).limit(cap)


def newest(
    conn: Connection,
    terms: Terms,
    where: list[ColumnElement[bool]],
    *,
    depth: int,
    limit: int,
    before: Keyset | None,
    after: Keyset | None,
) -> Walked | None:
    """The matches among the jobs ``where`` selects that a page needs, newest first, or
    ``None`` when a walk could not tell them (then ask :func:`indexed`).

    Without a key the page is the ``depth`` newest matches (``offset + limit``): one walk from
    the newest, which also counts up to :data:`COUNTED` (or to one past the page). With
    ``before`` / ``after`` (keyset paging) a second walk reads the ``limit`` matches next to
    the key; the count is still the first walk's. A walk answers when it found what it wanted
    or read every errored job in its direction."""
    # One past the page, so that a count (at least that many) tells a next page exists.
    wanted = COUNTED if before or after else max(COUNTED, depth + 1)
    top, top_complete = _walk(conn, terms, where, wanted, None, False)
    if top_complete:  # every match: the caller counts them with the other kinds' matches
        keys = top
    elif before is None and after is None:
        if len(top) < depth:
            return None
        keys = top[:depth]  # only the page's: the count is ``counted``
    else:
        key, ascending = (after, True) if after is not None and before is None else (before, False)
        keys, page_complete = _walk(conn, terms, where, limit, key, ascending)
        if len(keys) < limit and not page_complete:
            return None
    return Walked(keys, len(top), top_complete)


def _walk(
    conn: Connection,
    terms: Terms,
    where: list[ColumnElement[bool]],
    wanted: int,
    key: Keyset | None,
    ascending: bool,
) -> tuple[list[Keyset], bool]:
    """The first ``wanted`` matches (created_at, id) among the :data:`WALK_ROWS` errored jobs
    next to ``key`` (older, or newer if ``ascending``; without a key, the newest), in that
    order; and whether those rows were every errored job in that direction. The filters are
    tested on the rows read, not in the walk's bound: a selective filter reads no further."""
    order = (jobs.c.created_at, jobs.c.id) if ascending else (jobs.c.created_at.desc(), jobs.c.id.desc())
    window = select(jobs).where(HAS_ERROR)
    if key is not None:
        position = tuple_(jobs.c.created_at, jobs.c.id)
        window = window.where(position > tuple_(*key) if ascending else position < tuple_(*key))
    rows = window.order_by(*order).limit(WALK_ROWS).subquery("recent")
    adapt = ClauseAdapter(rows).traverse
    parts = [part for word in error_parts(terms.text) for part in word if part.isascii()]
    tests = [adapt(clause) for clause in where] + [rows.c.last_error.ilike(f"%{part}%") for part in parts]
    walk_order = (rows.c.created_at, rows.c.id) if ascending else (rows.c.created_at.desc(), rows.c.id.desc())
    found = (
        select(rows.c.created_at, rows.c.id).where(*tests, matches(terms)).order_by(*walk_order).limit(wanted)
    )
    keys: list[Keyset] = [(when, job_id) for when, job_id in conn.execute(found).all()]
    if len(keys) >= wanted:
        return keys, False
    last: Select[Any] = window.with_only_columns(literal_column("1")).select_from(jobs).order_by(*order)
    beyond = last.offset(WALK_ROWS - 1).limit(1)  # the bound's last row: is there one?
    return keys, conn.execute(beyond).first() is None
