"""The job list's reads with search and order (issue 17), beside the plain newest-first list.

``list_page`` picks the read: ``q`` (``store/read_search.search_jobs``), "next to run"
(``store/read_search.next_to_run``) or the plain list (``store/read_jobs.list_jobs``). Searches
run under the dashboard's statement timeout; one that runs past it shows an empty page with a
note instead of an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flask import current_app

from ..config import settings_of
from ..limits import PREVIEW_CHARS  # the pages show neither payload nor result: never load them whole
from ..store import read_jobs, read_search, read_timeout, search, stats_refresh
from .params import JobFilters
from .rendering import now


@dataclass(frozen=True)
class ListRead:
    page: read_jobs.JobPage | None
    notes: list[str]
    single: str | None = None  # the one job a search found: the page opens it
    # Where an error search matched each listed job's error, by job id: the list shows an
    # error column with the match marked whatever the status filter.
    excerpts: dict[str, search.ErrorExcerpt] = field(default_factory=dict)


def list_page(filters: JobFilters) -> ListRead:
    settings = settings_of(current_app)
    if filters.errors:
        return ListRead(None, [])
    if filters.order == "next" and not filters.q:
        page = read_search.next_to_run(
            limit=filters.limit,
            offset=filters.offset,
            now=now(),
            type=filters.type or None,
            preview_chars=PREVIEW_CHARS,
        )
        return ListRead(page, [])
    if not filters.q:
        policy = stats_refresh.policy_of(settings)
        page = read_jobs.list_jobs(
            limit=filters.limit,
            offset=filters.offset,
            status=filters.status or None,
            type=filters.type or None,
            policy=policy,
            preview_chars=PREVIEW_CHARS,
            before=filters.before,  # keyset paging (issue 18); claim order pages by offset
            after=filters.after,
        )
        return ListRead(page, [])
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
        with read_timeout.time_limit(settings.dashboard_query_timeout_ms):
            page = read_search.search_jobs(
                terms,
                limit=filters.limit,
                offset=filters.offset,
                status=filters.status or None,
                type=filters.type or None,
                preview_chars=PREVIEW_CHARS,
                before=filters.before,
                after=filters.after,
            )
    except read_timeout.QueryTimeout:
        notes.append("The search stopped early: it ran past the time limit. Narrow it with a status or type.")
        return ListRead(read_jobs.JobPage(count=0, results=[]), notes)
    single = str(page.results[0].id) if page.count == 1 and page.results and not filters.positioned else None
    excerpts = {str(job.id): search.error_excerpt(job.last_error, terms) for job in page.results}
    return ListRead(page, notes, single, {key: found for key, found in excerpts.items() if found})
