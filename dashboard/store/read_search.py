"""The job list read by search (``q``) and in claim order ("next to run"), issue 17.

Beside :func:`read_jobs.list_jobs` (newest first, no ``q``): same :class:`read_jobs.JobPage`,
so the list page and the API render either the same way.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from .read_jobs import (
    FILTERED_COUNT_CAP,
    JobPage,
    Keyset,
    cancelled_clause,
    list_columns,
    newest_first,
    read_page,
    types_matching,
)
from .read_timeout import reading
from .records import JobRecord
from .search import Terms, filters, jobs, matching


def search_jobs(
    terms: Terms,
    *,
    limit: int,
    offset: int,
    status: str | None = None,
    type: str | None = None,
    preview_chars: int | None = None,
    before: Keyset | None = None,
    after: Keyset | None = None,
    cancelled: bool | None = None,
) -> JobPage:
    """The jobs ``terms`` finds (with the status, type and ``cancelled`` filters), newest first.
    ``preview_chars``, ``before`` / ``after`` (keyset paging, issue 18): as in
    :func:`read_jobs.list_jobs`.

    The count is exact: each kind of search contributes at most ``search.ARM_CAP`` ids, read
    through its index, and the page sorts only those. One statement finds them once (a CTE that
    the count and the page share: an error word in a million errors is one bitmap scan of its
    GIN entries, not two), picks the page's ids by (created_at, id) from it, and fetches only
    those rows; a page past the last match counts them in a second statement.
    """
    with reading() as conn:
        types = types_matching(conn, type) if type else None
        found_jobs = matching(terms, filters(status, types), status=status, types=types)
        if cancelled is not None:  # on the jobs found (each arm capped), so still bounded
            raw = found_jobs.subquery()
            found_jobs = select(jobs.c.id, jobs.c.created_at).where(
                jobs.c.id.in_(select(raw.c.id)), cancelled_clause(cancelled)
            )
        found = found_jobs.cte("found")
        total = select(func.count()).select_from(found).scalar_subquery().label("search_total")
        keys = newest_first(select(found.c.id, found.c.created_at), found.c, limit, offset, before, after)
        page = select(*list_columns(preview_chars), total).where(jobs.c.id.in_(select(keys.subquery().c.id)))
        query = newest_first(page, jobs.c, limit, 0, before, after)
        rows = read_page(conn, query, after is not None and before is None)
        if rows:
            count = rows[0]["search_total"]
        else:
            count = conn.execute(select(func.count()).select_from(found_jobs.subquery())).scalar_one()
    return JobPage(count=count, results=[JobRecord.from_row(r) for r in rows])


def next_to_run(
    *, limit: int, offset: int, now: datetime, type: str | None = None, preview_chars: int | None = None
) -> JobPage:
    """Queued jobs that are due, in claim order (priority highest first, then available_at,
    created_at, id): the order the next claims take them. Jobs scheduled for later or backing
    off are not listed (the status filter ``queued`` shows them). Index: job_claim_idx, read in
    order; the count is exact up to ``FILTERED_COUNT_CAP``."""
    where = [jobs.c.status == "queued", jobs.c.available_at <= now, jobs.c.attempts < jobs.c.max_attempts]
    with reading() as conn:
        if type:
            where.append(jobs.c.type.in_(types_matching(conn, type)))
        capped = select(jobs.c.id).where(*where).limit(FILTERED_COUNT_CAP + 1).subquery()
        count = conn.execute(select(func.count()).select_from(capped)).scalar_one()
        query = (
            select(*list_columns(preview_chars))
            .where(*where)
            .order_by(jobs.c.priority.desc(), jobs.c.available_at, jobs.c.created_at, jobs.c.id)
            .limit(limit)
            .offset(offset)
        )
        rows = conn.execute(query).mappings().all()
    exact = count <= FILTERED_COUNT_CAP
    return JobPage(count=count, results=[JobRecord.from_row(r) for r in rows], count_exact=exact)
