"""The job list's reads with search and order, beside the plain newest-first list.

``list_page`` picks the read of ``store/reads/lists.py``: ``q`` (``search_jobs``), "next to run"
(``next_to_run``) or the plain list (``list_jobs``). Searches
run under the dashboard's statement timeout; one that runs past it shows an empty page with a
note instead of an error.

A live first page holds still: its poll carries ``top`` (the newest row it showed), gets the
rows from that one down, and counts the newer ones (at most :data:`NEW_JOBS_CAP`) for a "N new
jobs" link instead of moving every row down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from flask import current_app

from ..config import settings_of
from ..config.rules import LIVE_COUNT_CAP, PREVIEW_CHARS
from ..ops import recount
from ..store import reading
from ..store.reads import lists as find_jobs
from ..store.reads import search
from ..store.reads import workflows as read_workflows
from ..store.reads.columns import JobPage, Keyset
from .params import JobFilters
from .rendering import now

NEW_JOBS_CAP = 100
WAITING_CAP = LIVE_COUNT_CAP


@dataclass(frozen=True)
class ListRead:
    page: JobPage | None
    notes: list[str]
    single: str | None = None  # the one job a search found: the page opens it
    # Where an error search matched each listed job's error, by job id: the list shows an
    # error column with the match marked whatever the status filter.
    excerpts: dict[str, search.ErrorExcerpt] = field(default_factory=dict)
    newer: int = 0  # a held first page: jobs newer than its top row (at most NEW_JOBS_CAP)
    # A queued list: how many of the filter's jobs wait for their parents (at most
    # WAITING_CAP + 1), apart from the ready ones; None for any other list.
    waiting: int | None = None
    payload_search: bool = False  # reads the filter's newest 10,000 jobs: not re-run by polls


def _held(filters: JobFilters) -> Keyset | None:
    """The ``before`` that holds a live first page at its ``top`` row (that row included: one
    microsecond later, the database's resolution)."""
    if filters.top is None or filters.positioned or not filters.keyed:
        return None
    created_at, job_id = filters.top
    return created_at + timedelta(microseconds=1), job_id


def list_page(filters: JobFilters) -> ListRead:
    settings = settings_of(current_app)
    if filters.errors:
        return ListRead(None, [])
    held = _held(filters)
    if filters.order == "next" and not filters.q:
        page = find_jobs.next_to_run(
            limit=filters.limit,
            offset=filters.offset,
            now=now(),
            type=filters.type or None,
            preview_chars=PREVIEW_CHARS,
            queue=filters.queue or None,
        )
        return ListRead(page, [])
    if not filters.q:
        policy = recount.policy_of(settings)

        def read(limit: int, before: Keyset | None, after: Keyset | None) -> JobPage:
            return find_jobs.list_jobs(
                limit=limit,
                offset=filters.offset if before is None and after is None else 0,
                status=filters.status or None,
                type=filters.type or None,
                policy=policy,
                preview_chars=PREVIEW_CHARS,
                before=before,  # keyset paging; claim order pages by offset
                after=after,
                cancelled=filters.cancelled,
                queue=filters.queue or None,
            )

        page = read(filters.limit, held or filters.before, filters.after)
        newer = len(read(NEW_JOBS_CAP, None, filters.top).results) if held else 0
        waiting = None
        if filters.status == "queued" and filters.cancelled is not True:
            waiting = read_workflows.count_waiting(
                type=filters.type or None, queue=filters.queue or None, cap=WAITING_CAP + 1
            )
        return ListRead(page, [], newer=newer, waiting=waiting)
    try:
        terms = search.parse_q(filters.q)
    except search.SearchError as exc:
        filters.errors["q"] = str(exc)
        return ListRead(None, [])
    notes = [f"Searched as: {', '.join(terms.kinds)}."]
    if terms.payload is not None:
        notes.append(
            f"A payload search reads the newest {search.PAYLOAD_SCAN_ROWS:,} jobs of the status and type "
            "filter (there is no payload index): narrow it with a status or type to reach older jobs."
        )
    try:
        with reading.time_limit(settings.dashboard_query_timeout_ms):
            page = find_jobs.search_jobs(
                terms,
                limit=filters.limit,
                offset=filters.offset,
                status=filters.status or None,
                type=filters.type or None,
                preview_chars=PREVIEW_CHARS,
                before=held or filters.before,
                after=filters.after,
                cancelled=filters.cancelled,
                queue=filters.queue or None,
            )
    except reading.QueryTimeout:
        notes.append("The search stopped early: it ran past the time limit. Narrow it with a status or type.")
        return ListRead(JobPage(count=0, results=[]), notes)
    single = str(page.results[0].id) if page.count == 1 and page.results and not filters.positioned else None
    excerpts = {str(job.id): search.error_excerpt(job.last_error, terms) for job in page.results}
    matched = {key: found for key, found in excerpts.items() if found}
    return ListRead(page, notes, single, matched, payload_search=terms.payload is not None)
