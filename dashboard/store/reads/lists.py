"""Finding jobs for a list: the filters, the search, keyset paging and claim order.

Every job list reads through here, the dashboard's and the API's, and so does a bulk action's
selection (``actions.py``), so that a dry run counts exactly the jobs the list shows:

- :func:`list_jobs`: newest first, by status, type (a case-insensitive substring, resolved to
  the types that contain it: :func:`types_matching`) and whether an operator cancelled it;
- :func:`search_jobs`: what ``q`` finds (``search.parse_q`` reads it into ``Terms``;
  :func:`matching` turns those into one index lookup per kind, each stopped at
  :data:`ARM_CAP`), with the same filters;
- :func:`next_to_run`: due queued jobs in claim order.

Pages are newest first by (created_at, id), positioned by ``offset`` (the API) or by a key
(``before`` / ``after``: the dashboard's keyset paging). Counts stay bounded on a large table.
What each row carries is ``reads/columns.py``'s. Each read names the index it relies on.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Connection,
    DateTime,
    Select,
    Uuid,
    cast,
    func,
    literal,
    select,
    text,
    tuple_,
    union,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from ...config.rules import DEFAULT_QUEUE
from ..reading import in_range_order, reading, through_an_index
from ..states import STATUSES
from . import error_search
from .columns import JobPage, Keyset, jobs, list_columns, page_of
from .search import PAYLOAD_SCAN_ROWS, Terms
from .stats import DEFAULT_POLICY, JOB_TYPES_SQL, StatsPolicy, is_large

# A filtered list's count on a large table reads at most this many index entries (past it, the
# planner's estimate: "about N"), as the overview's counts do (limits.TYPE_COUNT_CAP).
FILTERED_COUNT_CAP = 1_000
# A type-filtered page with many matches is merged from one newest-first range of
# job_type_created_idx per (type, status), each read up to offset + limit rows: bounded while
# there are at most this many ranges and this deep a page (beyond, the planner's own plan).
MERGED_RANGES_MAX = 64
MERGED_DEPTH_MAX = 10_000
ARM_CAP = 10_000  # matches one kind of search contributes at most

# job_schedule_key_idx's predicate, as SQL text for the same reason; the range is in byte order
# (text_pattern_ops: ~>=~ and ~<~), ';' being the character after ':'.
IS_SCHEDULE_RUN = text("idempotency_key LIKE 'schedule:%'")
# That index's byte order, backwards (schedules.sql's schedule_runs reads it the same way).
NEWEST_KEY_FIRST = text("idempotency_key USING ~>~")
# job_queue_created_idx's predicate (models.py), as SQL text for the same reason: 'default' is
# limits.DEFAULT_QUEUE (tests/store/test_statements.py).
IN_NAMED_QUEUE = text("queue <> 'default'")


def cancelled_clause(cancelled: bool) -> Any:
    """Jobs an operator cancelled (``True``), or the others (``False``)."""
    return jobs.c.cancelled_at.is_not(None) if cancelled else jobs.c.cancelled_at.is_(None)


def types_matching(conn: Connection, fragment: str) -> list[str]:
    """The job types that contain ``fragment``, case-insensitively (the ``type`` filter)."""
    wanted = fragment.lower()
    return [name for name in conn.execute(JOB_TYPES_SQL).scalars() if wanted in name.lower()]


# The dynamic builders below (filters, list_jobs, search_jobs, matching, merged_ranges,
# next_to_run) assemble SQLAlchemy Core, never strings. Their keys come from the doors' job-list
# query strings and bulk selections, each checked there: status one of states.STATUSES
# (web/params.py, api/inputs.py), queue a queue name (limits.queue_problem), type resolved to
# stored type names by types_matching, q parsed into search.Terms (search.parse_q), keyset
# positions (created_at, id) from columns.Keyset; the values go as bound parameters.
def filters(
    status: str | None, types: list[str] | None, queue: str | None = None
) -> list[ColumnElement[bool]]:
    """The status filter (exact), the type filter (``types``: :func:`types_matching`'s
    answer; ``None``: no type filter) and the queue filter (exact) as WHERE clauses."""
    where: list[ColumnElement[bool]] = []
    if status:
        where.append(jobs.c.status == status)
    if types is not None:
        where.append(jobs.c.type.in_(types))
    if queue:
        where.append(jobs.c.queue == queue)
    return where


def list_jobs(
    *,
    limit: int,
    offset: int,
    status: str | None = None,
    type: str | None = None,
    policy: StatsPolicy = DEFAULT_POLICY,
    preview_chars: int | None = None,
    before: Keyset | None = None,
    after: Keyset | None = None,
    cancelled: bool | None = None,
    queue: str | None = None,
) -> JobPage:
    """Newest first. ``status`` exact, ``type`` a case-insensitive substring, ``queue`` exact
    (job_queue_created_idx (queue, status, created_at DESC, id DESC) for a named queue).

    ``cancelled``: ``True`` only the jobs an operator cancelled (failed, ``cancelled_at`` set:
    job_cancelled_idx), ``False`` none of them, ``None`` either.

    ``preview_chars``: the columns as ``list_columns.list_columns`` gives them (the dashboard's
    lists pass ``limits.PREVIEW_CHARS``; the API leaves it unset and gets payloads whole).

    ``before`` / ``after`` (the dashboard's keyset paging) give the page of rows older / newer
    than that (created_at, id), whatever ``offset`` says; the API pages by ``offset``.

    On a large table (``policy``) every count is exact only up to :data:`FILTERED_COUNT_CAP`
    (an index range read up to the cap), past it the planner's estimate: a list never counts
    millions of rows, nor computes the overview's figures, to show its own count.

    The substring is first resolved to the job types that contain it (:func:`types_matching`),
    so the filter is ``type IN (...)`` and uses job_type_created_idx (type, status,
    created_at DESC, id DESC) instead of testing every row. A filter with many matches reads
    the page's keys from one newest-first index range per group (:func:`merged_ranges`): per
    (type, status) for a type or a status filter (every type for a status alone), per status
    for a named queue. Index: jobs_job_created_at_idx for the unfiltered order and the default
    queue.
    """
    where = []
    if status:
        where.append(jobs.c.status == status)
    if cancelled is not None:
        where.append(cancelled_clause(cancelled))
    if queue:
        where.append(jobs.c.queue == queue)
    with reading() as conn:
        types = types_matching(conn, type) if type else []
        if type:
            where.append(jobs.c.type.in_(types))
        count, exact = _filtered_count(conn, where, policy)
        columns = list_columns(preview_chars)
        keys_from: Any = None  # where the page's keys (id, created_at) come from, if not the table
        if (type or queue) and exact and count <= FILTERED_COUNT_CAP:
            # Few matches: read all their keys through the filter's index (index only) and
            # sort them. Left to itself the planner may walk the created_at index instead,
            # expecting matches to be common (it multiplies the status and type frequencies),
            # and for a rare combination reads the whole table. OFFSET 0: a fence.
            keys_from = select(jobs.c.id, jobs.c.created_at).where(*where).offset(0).subquery()
        elif type and not queue and cancelled is None:
            keys_from = merged_ranges(types, status, limit + offset, before, after)
        elif queue and queue != DEFAULT_QUEUE and not type and cancelled is None:
            keys_from = merged_ranges([], status, limit + offset, before, after, queue=queue)
        elif status and not type and not queue and cancelled is not True:
            every = types_matching(conn, "")
            keys_from = merged_ranges(every, status, limit + offset, before, after, cancelled=cancelled)
        if keys_from is not None:
            # The page's keys from those, then only those rows from the table.
            keys = newest_first(
                select(keys_from.c.id, keys_from.c.created_at), keys_from.c, limit, offset, before, after
            )
            page = keys.subquery()
            ascending = after is not None and before is None
            order = (
                (jobs.c.created_at, jobs.c.id) if ascending else (jobs.c.created_at.desc(), jobs.c.id.desc())
            )
            query = select(*columns).select_from(jobs.join(page, jobs.c.id == page.c.id)).order_by(*order)
        else:
            query = newest_first(select(*columns).where(*where), jobs.c, limit, offset, before, after)
        nothing = bool(type or queue) and exact and count == 0  # a live count: no page to read
        rows = [] if nothing else read_page(conn, query, after is not None and before is None)
    return page_of(rows, count, exact=exact)


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
    queue: str | None = None,
) -> JobPage:
    """The jobs ``terms`` finds (with the status, type, queue and ``cancelled`` filters), newest first.
    ``preview_chars``, ``before`` / ``after`` (keyset paging): as in :func:`list_jobs`.

    Error words are first looked for among the newest errors (``error_search.newest``): a word
    common there gets its newest matches and a count of at least ``error_search.COUNTED`` (exact
    when every error was read); otherwise the GIN gives them. Every other kind of search, and an
    error search through the GIN, contributes at most :data:`ARM_CAP` ids, read through its
    index in the index's order (for error words, the table's: past the cap, not the newest), and
    the page sorts only those; the count is exact below the cap (at it, a lower bound:
    ``count_exact`` false). One statement finds them once (a CTE that the count and the page
    share), picks the page's ids by (created_at, id) from it, and fetches only those rows; a page
    past the last match counts them in a second statement (the first page needs none: no row,
    no match).
    """
    with reading() as conn:
        types = types_matching(conn, type) if type else None
        where = filters(status, types, queue)
        walked = None
        if terms.error_query is not None:
            tested = where if cancelled is None else [*where, cancelled_clause(cancelled)]
            walked = error_search.newest(
                conn, terms, tested, depth=limit + offset, limit=limit, before=before, after=after
            )
        found_jobs = matching(
            terms,
            where,
            status=status,
            types=None if queue else types,
            error_keys=walked.keys if walked is not None else None,
        )
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
        with in_range_order(conn) if terms.payload is not None else nullcontext():
            rows = read_page(conn, query, after is not None and before is None)
            if rows:
                count = rows[0]["search_total"]
            elif offset == 0 and before is None and after is None:
                count = 0  # no row on the first page: no match
            else:
                count = conn.execute(select(func.count()).select_from(found_jobs.subquery())).scalar_one()
    if walked is not None and not walked.complete:  # the page's matches, not every one seen
        return page_of(rows, max(count, walked.counted), exact=False)  # at least that many
    return page_of(rows, count, exact=count < ARM_CAP)  # at the cap: at least that many


def next_to_run(
    *,
    limit: int,
    offset: int,
    now: datetime,
    type: str | None = None,
    preview_chars: int | None = None,
    queue: str | None = None,
) -> JobPage:
    """Queued jobs that are due, in claim order (priority highest first, then available_at,
    created_at, id): the order the next claims take them. Jobs scheduled for later or backing
    off are not listed (the status filter ``queued`` shows them). Index: job_claim_idx, read in
    order; the count is exact up to ``FILTERED_COUNT_CAP``. ``queue``: one queue's, read as its
    range of job_queue_claim_idx."""
    where = [jobs.c.status == "queued", jobs.c.available_at <= now, jobs.c.attempts < jobs.c.max_attempts]
    if queue:
        where.append(jobs.c.queue == queue)
    with reading() as conn:
        if type:
            where.append(jobs.c.type.in_(types_matching(conn, type)))
        count = capped_count(conn, where, FILTERED_COUNT_CAP + 1)
        query = (
            select(*list_columns(preview_chars))
            .where(*where)
            .order_by(jobs.c.priority.desc(), jobs.c.available_at, jobs.c.created_at, jobs.c.id)
            .limit(limit)
            .offset(offset)
        )
        rows = conn.execute(query).mappings().all()
    return page_of(rows, count, exact=count <= FILTERED_COUNT_CAP)


def matching(
    terms: Terms,
    where: list[ColumnElement[bool]],
    *,
    status: str | None,
    types: list[str] | None = None,
    error_keys: Sequence[Keyset] | None = None,
) -> Select[Any] | CompoundSelect[Any]:
    """The jobs ``terms`` finds among those ``where`` selects: a SELECT of ``id`` and
    ``created_at`` (read with the row each arm already visits, so a page can pick its newest
    without fetching every match again). ``types``: the type filter's types (already in
    ``where``), so that a payload search reads the filter's newest jobs as one index range per
    (type, status). ``error_keys``: the error arm's matches as ``error_search.newest`` found
    them; ``None``: read through the GIN (``error_search.indexed``, at most :data:`ARM_CAP`)."""
    if terms.payload is not None:
        merged = None
        if types:
            # = where's filters; each range reads its rows' payloads as it goes, not by id: run
            # under read_timeout.in_range_order, or the planner may walk the created_at index
            merged = merged_ranges(types, status, PAYLOAD_SCAN_ROWS, None, None, payload=True)
        if merged is not None:
            newest = (
                select(merged.c.id, merged.c.created_at, merged.c.payload)
                .order_by(merged.c.created_at.desc())
                .limit(PAYLOAD_SCAN_ROWS)
                .subquery()
            )
        else:
            newest = (
                select(jobs.c.id, jobs.c.created_at, jobs.c.payload)
                .where(*where)
                .order_by(jobs.c.created_at.desc())
                .limit(PAYLOAD_SCAN_ROWS)
                .subquery()
            )
        return select(newest.c.id, newest.c.created_at).where(
            newest.c.payload.op("@>")(cast(literal(terms.payload, JSONB), JSONB))
        )
    found = (jobs.c.id, jobs.c.created_at)
    arms: list[Select[Any]] = []
    if terms.id_range is not None:
        low, high = terms.id_range
        arms.append(select(*found).where(jobs.c.id.between(low, high), *where).limit(ARM_CAP))
    if terms.idempotency_key is not None:
        arms.append(select(*found).where(jobs.c.idempotency_key == terms.idempotency_key, *where))
    if terms.key_prefix is not None:  # a schedule's runs
        prefix_low, prefix_high = terms.key_prefix, terms.key_prefix[:-1] + ";"
        key = jobs.c.idempotency_key
        in_range = (key.op("~>=~")(prefix_low), key.op("~<~")(prefix_high))
        # Newest slots first (keys end in their ISO times): past the cap, the newest runs.
        arms.append(
            select(*found).where(IS_SCHEDULE_RUN, *in_range, *where).order_by(NEWEST_KEY_FIRST).limit(ARM_CAP)
        )
    if terms.error_query is not None:  # any status: a job backing off has its error too
        if error_keys is None:
            arms.append(error_search.indexed(terms, where, ARM_CAP))
        elif error_keys:  # found by error_search.newest, already tested against ``where``
            # Two arrays, not a VALUES row per match: a thousand matches stay two parameters.
            # (None found: no arm; text terms always have the idempotency key's.)
            times = literal([when for when, _ in error_keys], ARRAY(DateTime(timezone=True)))
            ids = literal([job_id for _, job_id in error_keys], ARRAY(Uuid))
            walked = func.unnest(times, ids).table_valued("created_at", "id").render_derived(name="walked")
            arms.append(select(walked.c.id, walked.c.created_at))
    subqueries = [arm.subquery() for arm in arms]
    if len(subqueries) == 1:
        return select(subqueries[0].c.id, subqueries[0].c.created_at)
    return union(*[select(s.c.id, s.c.created_at) for s in subqueries])


def merged_ranges(
    types: Sequence[str],
    status: str | None,
    depth: int,
    before: Keyset | None,
    after: Keyset | None,
    *,
    queue: str | None = None,
    cancelled: bool | None = None,
    payload: bool = False,
) -> Any:
    """The keys (id, created_at) a filtered page can come from, as a subquery: for each
    (type, status), its ``depth`` newest rows (or oldest after ``after``), read as one range of
    job_type_created_idx (index only); with ``queue`` (a named queue) instead of types, one
    range per status of job_queue_created_idx. ``cancelled``: only those (or the others) of
    each range, read from the rows the range gives.
    A page never walks the created_at index past rows of other types, queues or statuses (a
    recent burst of them would be read row by row). ``payload``: each row's payload too, read
    from the table as the range goes (no longer index only: run the statement under
    ``read_timeout.in_range_order``). ``None`` when unbounded (too many ranges, or too deep an
    offset)."""
    statuses = [status] if status else list(STATUSES)
    groups = [jobs.c.queue == queue] if queue else [jobs.c.type == job_type for job_type in types]
    if len(groups) * len(statuses) > MERGED_RANGES_MAX or depth > MERGED_DEPTH_MAX or not groups:
        return None
    extra = [] if cancelled is None else [cancelled_clause(cancelled)]
    if queue:
        extra.append(IN_NAMED_QUEUE)
    columns = (jobs.c.id, jobs.c.created_at, *((jobs.c.payload,) if payload else ()))
    branches = []
    for group in groups:
        for each in statuses:
            branch = select(*columns).where(group, jobs.c.status == each, *extra)
            branches.append(newest_first(branch, jobs.c, depth, 0, before, after).subquery().select())
    return union_all(*branches).subquery()


def newest_first(
    query: Select[Any], cols: Any, limit: int, offset: int, before: Keyset | None, after: Keyset | None
) -> Select[Any]:
    """``query`` paged newest first by (created_at, id): the rows older than ``before``, or the
    ``limit`` oldest newer than ``after`` (in ascending order: :func:`read_page` turns them),
    else at ``offset``. Index: the created_at index (or job_type_created_idx) read from the key."""
    key, newest = tuple_(cols.created_at, cols.id), (cols.created_at.desc(), cols.id.desc())
    if before is not None:
        return query.where(key < tuple_(*before)).order_by(*newest).limit(limit)
    if after is not None:
        return query.where(key > tuple_(*after)).order_by(cols.created_at, cols.id).limit(limit)
    return query.order_by(*newest).limit(limit).offset(offset)


def read_page(conn: Connection, query: Select[Any], ascending: bool) -> list[Any]:
    rows = list(conn.execute(query).mappings().all())
    return rows[::-1] if ascending else rows


def _filtered_count(conn: Connection, where: list[Any], policy: StatsPolicy) -> tuple[int, bool]:
    """(count, exact) of a type-filtered list. On a large table, counted exactly up to
    :data:`FILTERED_COUNT_CAP` rows; past it, the planner's estimate (counting millions of
    matching rows would cost seconds on every page)."""
    if not is_large(conn, policy):
        return conn.execute(select(func.count()).select_from(jobs).where(*where)).scalar_one(), True
    count = capped_count(conn, where, FILTERED_COUNT_CAP + 1)
    if count <= FILTERED_COUNT_CAP:
        return count, True
    probe = select(text("1")).select_from(jobs).where(*where)
    compiled = probe.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {compiled}", compiled.params).scalar_one()
    return max(int(plan[0]["Plan"]["Plan Rows"]), count), False


def capped_count(conn: Connection, where: list[Any], cap: int) -> int:
    """How many jobs ``where`` selects, counted up to ``cap``: walked through an index that
    serves the filter and stopped at the cap (``read_timeout.through_an_index``); no filter:
    the table's first ``cap`` rows."""
    capped = select(text("1")).select_from(jobs).where(*where).limit(cap).subquery()
    counting = select(func.count()).select_from(capped)
    if not where:
        return int(conn.execute(counting).scalar_one())
    with through_an_index(conn):
        return int(conn.execute(counting).scalar_one())
