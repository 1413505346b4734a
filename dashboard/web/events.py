"""The global event feed: newest first, positioned by event id, with a live "new events" notice."""

from __future__ import annotations

from flask import render_template, request

from ..store.reads import jobs as read_jobs
from ..store.states import EVENT_TYPES
from .blueprint import bp
from .params import EventFilters, event_filters
from .read_source import from_replica
from .rendering import page_or_fragment, refused_status

NEW_EVENTS_CAP = 100


def _newest_shown(filters: EventFilters, page: read_jobs.EventPage | None) -> int:
    """The id the live notice counts from: the newest event on the page, or the cursor."""
    if page and page.results:
        return page.results[0].id
    if filters.after is not None:
        return filters.after
    if filters.before is not None:
        return filters.before - 1
    return 0


@bp.get("/events/")
@from_replica
def events() -> tuple[str, int]:
    """The event feed; a refused filter is marked at its field (:func:`refused_status`)."""
    filters = event_filters(request.args)
    page = None
    if not filters.errors:
        page = read_jobs.list_events(
            limit=filters.limit,
            before=filters.before,
            after=filters.after,
            types=filters.types,
            exclude=filters.exclude,
            job_id=filters.job_id,
        )
    html = page_or_fragment(
        "jobqueue/events/feed.html",
        "jobqueue/fragments/event_feed.html",
        filters=filters,
        page=page,
        job_types=read_jobs.types_of([e.job_id for e in page.results]) if page else {},
        event_types=EVENT_TYPES,
        newest_shown=_newest_shown(filters, page),
        new_events_cap=NEW_EVENTS_CAP,
    )
    return html, refused_status(bool(filters.errors))


@bp.get("/events/newer/")
@from_replica
def newer_events() -> str:
    """The polled notice: how many events (with the feed's filters) are newer than ``after``."""
    filters = event_filters(request.args)
    after = filters.after or 0
    count = 0
    if not filters.errors:
        count = read_jobs.count_events_after(
            after, types=filters.types, exclude=filters.exclude, job_id=filters.job_id, cap=NEW_EVENTS_CAP
        )
    return render_template(
        "jobqueue/fragments/new_events.html", filters=filters, after=after, count=count, cap=NEW_EVENTS_CAP
    )
