"""What the job pages and the API read of one job and of the event feed: the job, its
timeline, the global feed and its "new events" count.

The job lists are ``reads/lists.py``'s. Each function names the index it relies on.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, select

from ..models import Job, JobEvent
from ..reading import in_range_order, reading
from ..records import EventRecord, JobRecord
from .columns import list_columns

jobs = Job.__table__
events = JobEvent.__table__


def get_job(job_id: uuid.UUID) -> JobRecord | None:
    with reading() as conn:
        row = conn.execute(select(*list_columns(None)).where(jobs.c.id == job_id)).mappings().first()
    return JobRecord.from_row(row) if row is not None else None


def job_events(
    job_id: uuid.UUID, *, after_id: int | None = None, limit: int | None = None
) -> list[EventRecord]:
    """One job's timeline, oldest first: every event, or the ``limit`` first with ``id >
    after_id``. Index: job_event_job_id_idx (job_id, id), planned under ``in_range_order``:
    otherwise, for a job holding a few percent of all events, the planner may walk
    job_event_id_idx from the oldest event and filter, and a long job's events are the newest
    (5.8M events read for 50 on a table of 5.9M)."""
    query = select(events).where(events.c.job_id == job_id).order_by(events.c.id)
    if after_id is not None:
        query = query.where(events.c.id > after_id)
    if limit is not None:
        query = query.limit(limit)
    with reading() as conn, in_range_order(conn):
        rows = conn.execute(query).mappings().all()
    return [EventRecord.from_row(r) for r in rows]


def events_within(job_id: uuid.UUID, *, after_id: int, window: int) -> list[EventRecord] | None:
    """The job's events with ``id > after_id``, oldest first, when there are at most ``window``
    of them; ``None`` when there are more (a poll that far behind gets the page again). One
    read: a probe at the ``window + 1``-th in job_event_job_id_idx (index only), then the events,
    so no window is read only to be dropped; planned as :func:`job_events`."""
    where = (events.c.job_id == job_id, events.c.id > after_id)
    probe = select(events.c.id).where(*where).order_by(events.c.id).offset(window).limit(1)
    query = select(events).where(*where).order_by(events.c.id).limit(window)
    with reading() as conn, in_range_order(conn):
        if conn.execute(probe).first() is not None:
            return None
        rows = conn.execute(query).mappings().all()
    return [EventRecord.from_row(r) for r in rows]


@dataclass(frozen=True)
class EventPage:
    results: list[EventRecord]  # newest first
    has_older: bool
    has_newer: bool


def list_events(
    *,
    limit: int,
    before: int | None = None,
    after: int | None = None,
    type: str | None = None,
    job_id: uuid.UUID | None = None,
    types: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> EventPage:
    """A page of the global feed, newest first, positioned by event id (a cursor).

    ``before=N`` gives the ``limit`` newest events with ``id < N`` (the next page);
    ``after=N`` the ``limit`` oldest with ``id > N`` (the previous page). Events only ever
    get larger ids, so new events never shift a page: walking ``before`` visits each older
    event exactly once. ``types`` keeps only these types (with ``type``, any of them),
    ``exclude`` drops these. Index: job_event_id_idx, or job_event_job_id_idx with ``job_id``
    (planned under ``in_range_order``, as :func:`job_events`).
    """
    where = _event_where(type, job_id, types, exclude)
    reverse = after is not None
    if reverse:
        where.append(events.c.id > after)
    elif before is not None:
        where.append(events.c.id < before)
    order = events.c.id.asc() if reverse else events.c.id.desc()
    query = select(events).where(*where).order_by(order).limit(limit + 1)
    with reading() as conn, in_range_order(conn) if job_id is not None else nullcontext():
        rows = conn.execute(query).mappings().all()
    more = len(rows) > limit
    records = [EventRecord.from_row(r) for r in rows[:limit]]
    if reverse:
        records.reverse()
        return EventPage(results=records, has_older=True, has_newer=more)
    return EventPage(results=records, has_older=more, has_newer=before is not None)


def types_of(job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The job type of each of ``job_ids`` that still exists (the feed's type column): one
    primary-key lookup per id, a page's worth at most."""
    if not job_ids:
        return {}
    query = select(jobs.c.id, jobs.c.type).where(jobs.c.id.in_(sorted(set(job_ids))))
    with reading() as conn:
        return {row.id: row.type for row in conn.execute(query)}


def _event_where(
    type: str | None, job_id: uuid.UUID | None, types: Sequence[str], exclude: Sequence[str]
) -> list[Any]:
    # The feed's filters, from the query strings of web/events.py and api/jobs.py (event types,
    # a job id, each checked there), as SQLAlchemy Core with bound values: never strings.
    wanted = sorted({*types, *([type] if type else [])})
    where: list[ColumnElement[bool]] = []
    if wanted:
        where.append(events.c.type.in_(wanted))
    if exclude:
        where.append(events.c.type.not_in(sorted(set(exclude))))
    if job_id is not None:
        where.append(events.c.job_id == job_id)
    return where


def count_events_after(
    after: int,
    *,
    type: str | None = None,
    job_id: uuid.UUID | None = None,
    cap: int = 100,
    types: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> int:
    """How many events have ``id > after`` (with the feed's filters), counting at most ``cap``.

    The cap keeps the feed's "new events" poll cheap however far behind the page is.
    Index: job_event_id_idx, or job_event_job_id_idx with ``job_id``.
    """
    where = [events.c.id > after, *_event_where(type, job_id, types, exclude)]
    inner = select(events.c.id).where(*where).limit(cap).subquery()
    with reading() as conn:
        return conn.execute(select(func.count()).select_from(inner)).scalar_one()


@dataclass(frozen=True)
class JobTimeline:
    """One job as its page shows it: the row and its events."""

    job: JobRecord
    events: list[EventRecord]
    older: bool = False  # events older than ``events`` exist (a window was asked for)


def job_timeline(job_id: uuid.UUID, *, limit: int | None = None) -> JobTimeline | None:
    """The job, its timeline (oldest first; with ``limit``, only the newest ``limit`` events)
    on one connection; None if there is no such job.
    Indexes: the primary key, job_event_job_id_idx (job_id, id), read newest first."""
    with reading() as conn:
        row = conn.execute(select(*list_columns(None)).where(jobs.c.id == job_id)).mappings().first()
        if row is None:
            return None
        job = JobRecord.from_row(row)
        query = select(events).where(events.c.job_id == job_id).order_by(events.c.id.desc())
        if limit is not None:
            query = query.limit(limit + 1)
        timeline = [EventRecord.from_row(r) for r in conn.execute(query).mappings().all()]
    older = limit is not None and len(timeline) > limit
    timeline = timeline[:limit] if older else timeline
    timeline.reverse()
    return JobTimeline(job=job, events=timeline, older=older)
