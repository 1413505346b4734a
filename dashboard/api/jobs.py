"""The endpoints: validate (done by the registry), call the store, serialise.

No view writes job state or builds a query: jobs are created through ``store.enqueue`` and
retried through ``store.actions``; reads go through the store's read modules.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

from flask import Response, current_app, request, url_for
from pydantic import BaseModel
from sqlalchemy.exc import SQLAlchemyError

from ..config import settings_of
from ..config.rules import BIGINT_MAX, DEFAULT_PRIORITY
from ..ops import recount
from ..runtime.failures import first_line
from ..runtime.handlers import handler_queue, registered_types
from ..store.lifecycle import actions
from ..store.lifecycle import create as enqueue
from ..store.reads import jobs as read_jobs
from ..store.reads import lists as find_jobs
from ..store.reads import search
from ..store.reads import stats as read_stats
from ..store.values import utcnow
from ..tracing import traceparent
from .access import audit_data
from .blueprint import routes
from .cursor import Cursor
from .errors import ApiError, validation_error
from .inputs import BulkCreateJob, BulkCreateJobs, CreateJob
from .outputs import (
    BulkResults,
    Config,
    Conflict,
    Health,
    Job,
    JobEvent,
    JobEventList,
    JobEventPage,
    JobPage,
    Stats,
    StatsDetail,
    bulk_results_json,
    job_json,
    job_renderer,
)
from .queries import EventFeedQuery, JobEventsQuery, JobListQuery, offset_max
from .read_source import from_replica
from .registry import Reply, query_values
from .stats_detail import detail as stats_detail


def json_response(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``model`` as JSON, timestamps in ``TIME_ZONE``; fields left unset (``detail`` of a healthy
    ``Health``) are omitted, every field the store returned is kept, nulls included."""
    tz = settings_of(current_app).tz
    body = model.model_dump_json(context={"tz": tz}, exclude_unset=True)
    return current_app.response_class(body, status=status, headers=headers, mimetype="application/json")


def job_or_404(job_id: uuid.UUID) -> Job:
    job = read_jobs.get_job(job_id)
    if job is None:
        raise ApiError(404, "Not found.")
    return Job.model_validate(job)


def page_url(query: type[BaseModel], **changes: Any) -> str:
    """This request's absolute URL with ``changes`` applied to its query (``None`` removes).

    Only the parameters the endpoint knows are carried over: anything else a client sent has
    no business in a link the API hands out.
    """
    given = query_values(request.args, query)
    args = {key: value for key, value in given.items() if key in query.model_fields}
    args.update(changes)
    params = {key: value for key, value in args.items() if value is not None}
    base = url_for(request.endpoint or "", _external=True)
    return f"{base}?{urlencode(params, doseq=True)}" if params else base  # repeated: each value


def feed_link(cursor: Cursor | None, limit: int) -> str | None:
    return page_url(EventFeedQuery, cursor=cursor.encode(), limit=limit) if cursor else None


route = routes.route


@route(
    "/health/",
    "GET",
    summary="Liveness and database reachability",
    tag="ops",
    replies={
        200: Reply("The database answers.", Health),
        503: Reply("The database cannot be reached.", Health),
    },
)
def health() -> Response:
    """200 when the database answers a trivial query, else 503 ``{"ok": false, "database":
    "error"}``. The reason (host, port, driver message) is logged; the answer (an open
    endpoint) carries it as ``detail`` only in development (``DEBUG``)."""
    try:
        read_stats.database_ok()
    except SQLAlchemyError as exc:
        current_app.logger.warning("Health check: database unreachable: %s", exc)
        if not settings_of(current_app).debug:
            return json_response(Health(ok=False, database="error"), 503)
        return json_response(Health(ok=False, database="error", detail=first_line(exc)), 503)
    return json_response(Health(ok=True, database="ok"))


@route(
    "/config/",
    "GET",
    summary="Worker settings and job types",
    tag="ops",
    replies={200: Reply("The settings in force.", Config)},
)
def config() -> Response:
    """The worker settings of this deployment, under their environment names, and every
    registered job type (the values `type` accepts on create)."""
    settings = settings_of(current_app).worker.as_dict()
    return json_response(Config.model_validate({**settings, "job_types": registered_types()}))


@route(
    "/jobs/",
    "POST",
    summary="Create a job",
    body=CreateJob,
    replies={
        201: Reply("Created.", Job),
        200: Reply("A job with this idempotency_key, or live with this unique_key, exists: that job.", Job),
    },
)
def create_job(body: CreateJob) -> Response:
    """Queue a job (event `created`). With an `idempotency_key` that is already taken, nothing
    is created and the existing job is returned with 200, even when clients race. With
    `depends_on` it waits for those jobs (docs: "Workflows"); an unknown one is a 400 naming it."""
    with store_refusals():
        result = enqueue.create_job(job_spec(body, traceparent=traceparent()), event_data=audit_data())
    answer = job_json(result.job, settings_of(current_app).tz)  # = json_response(Job.model_validate(...))
    location = url_for("jobqueue_api.job_detail", job_id=result.job.id, _external=True)
    status = 201 if result.created else 200
    headers = {"Location": location}
    return current_app.response_class(answer, status=status, headers=headers, mimetype="application/json")


def job_spec(
    body: CreateJob | BulkCreateJob, max_attempts_default: int | None = None, traceparent: str | None = None
) -> enqueue.JobSpec:
    """A create body with its defaults filled in (null means default, as on every field).
    ``max_attempts_default``: the app's ``worker.max_attempts_default``, read once per bulk
    request rather than once per job; ``traceparent``: the request's trace (``tracing.py``)."""
    if max_attempts_default is None:
        max_attempts_default = settings_of(current_app).worker.max_attempts_default
    return enqueue.JobSpec(
        type=body.type,
        payload=body.payload or {},
        priority=DEFAULT_PRIORITY if body.priority is None else body.priority,
        available_at=body.available_at,
        max_attempts=body.max_attempts or max_attempts_default,
        idempotency_key=body.idempotency_key,
        queue=body.queue or handler_queue(body.type),
        depends_on=tuple(body.depends_on or ()),
        on_parent_failure=body.on_parent_failure,
        workflow=body.workflow,
        unique_key=body.unique_key,
        unique_for=body.unique_for,
        unique_while=body.unique_while,
        debounce=body.debounce,
        traceparent=traceparent,
    )


_REFUSED = re.compile(r"(?:job (\d+): )?(depends_on|on_parent_failure|workflow)\b:? ?(.*)", re.DOTALL)


@contextmanager
def store_refusals() -> Iterator[None]:
    """A create the store refuses after validation (a parent that does not exist, or is gone
    by now) as a 400 naming the field, ``jobs.3.depends_on`` in a bulk create; nothing is
    written (the store's transaction rolled back)."""
    try:
        yield
    except ValueError as exc:
        found = _REFUSED.fullmatch(str(exc))
        if found is None:
            raise
        index, field, message = found.groups()
        where = f"jobs.{index}.{field}" if index is not None else field
        text = message[:1].upper() + message[1:]
        raise validation_error({where: [text + ("" if text.endswith(".") else ".")]}) from None


@route(
    "/jobs/bulk/",
    "POST",
    summary="Create many jobs",
    body=BulkCreateJobs,
    replies={
        201: Reply("At least one job was created.", BulkResults),
        200: Reply("Every idempotency_key was taken: nothing was created.", BulkResults),
    },
)
def create_jobs(body: BulkCreateJobs) -> Response:
    """Queue up to 1000 jobs in one transaction (each gets its `created` event). All or nothing:
    every job is validated first, and one invalid job makes the whole request a 400 that names
    it by index (`jobs.3.priority`) with nothing written. Idempotency keys work per job, as on
    `POST /api/jobs/`: a taken key (or one an earlier job of the same request holds) returns
    that job with `created: false`. `results` follow the order of `jobs`. A job's `depends_on`
    may name an earlier job of the request by its index: one request creates a whole graph."""
    if errors := body.index_errors():
        raise validation_error(errors)
    settings = settings_of(current_app)
    default = settings.worker.max_attempts_default
    render, rendered = job_renderer(settings.tz), list[bytes]()
    traced = traceparent()
    with store_refusals():
        results = enqueue.create_jobs(
            [job_spec(job, default, traced) for job in body.jobs],
            event_data=audit_data(),
            meanwhile=lambda records: rendered.extend(map(render, records)),  # while the server inserts
        )
    whole = rendered if len(rendered) == len(results) else None  # a graph is rendered after
    answer = bulk_results_json(results, settings.tz, whole)  # = BulkResults(...), without Job models
    status = 201 if any(r.created for r in results) else 200
    return current_app.response_class(answer, status=status, mimetype="application/json")


@route(
    "/jobs/",
    "GET",
    summary="List jobs",
    query=JobListQuery,
    replies={200: Reply("A page of jobs, newest first.", JobPage)},
)
@from_replica
def job_list(query: JobListQuery) -> Response:
    """Limit-offset pages, newest first. `limit` defaults to ``JOB_PAGE_SIZE``; a larger `limit`
    than ``JOB_PAGE_MAX`` is reduced to it (``dashboard/config/rules.py``)."""
    limit, offset = query.page_size, query.offset
    policy = recount.policy_of(settings_of(current_app))
    terms = search.parse_api_q(query.q) if query.q else None  # `q`: the list narrowed by a search
    if terms is not None:
        page = find_jobs.search_jobs(
            terms,
            limit=limit,
            offset=offset,
            status=query.status,
            type=query.type,
            cancelled=query.cancelled,
            queue=query.queue,
        )
    else:
        page = find_jobs.list_jobs(
            limit=limit,
            offset=offset,
            status=query.status,
            type=query.type,
            policy=policy,
            cancelled=query.cancelled,
            queue=query.queue,
        )
    deeper = offset + limit < page.count and offset + limit <= offset_max()  # never a link to a 400
    next_url = page_url(JobListQuery, limit=limit, offset=offset + limit) if deeper else None
    previous_url = None
    if offset > 0:
        previous_url = page_url(JobListQuery, limit=limit, offset=offset - limit if offset > limit else None)
    body = JobPage(
        count=page.count,
        next=next_url,
        previous=previous_url,
        results=[Job.model_validate(job) for job in page.results],
    )
    return json_response(body)


@route(
    "/jobs/stats/",
    "GET",
    summary="Queue statistics",
    replies={200: Reply("Totals by status and queue health.", Stats)},
)
@from_replica
def job_stats() -> Response:
    """Counts by status (all four always present), expired leases, queued retries, the
    oldest queued job's creation time, and `waiting`: the queued jobs waiting for their
    parents (still counted in `queued`)."""
    return json_response(
        Stats.model_validate(
            read_stats.stats(utcnow(), recount.policy_of(settings_of(current_app))).as_dict()
        )
    )


@route(
    "/jobs/stats/detail/",
    "GET",
    summary="Queue statistics in detail",
    replies={200: Reply("The overview's figures: queued split, waits, per-type rows, charts.", StatsDetail)},
)
@from_replica
def job_stats_detail() -> Response:
    """Queued split into ready / scheduled / retrying, the oldest ready job's wait (now minus
    its `available_at`), one row per job type, and per-minute outcomes, failure rate and claim
    waits of the last hour, with run times per type. Every count reads a bounded index range:
    exact up to a cap, then `exact: false`."""
    return json_response(StatsDetail.model_validate(stats_detail(utcnow())))


@route("/jobs/<uuid:job_id>/", "GET", summary="One job", replies={200: Reply("The job.", Job)})
def job_detail(job_id: uuid.UUID) -> Response:
    """The job, in the same shape as the list's items."""
    return json_response(job_or_404(job_id))


@route(
    "/jobs/<uuid:job_id>/events/",
    "GET",
    summary="One job's events",
    query=JobEventsQuery,
    replies={200: Reply("The job's timeline, oldest first.", JobEventList)},
)
def job_events(job_id: uuid.UUID, query: JobEventsQuery) -> Response:
    """Every event of the job, ascending by id. `after_id` keeps the events after that id,
    `limit` the first that many of them (a poller asks for what is new since its last)."""
    job_or_404(job_id)
    found = read_jobs.job_events(job_id, after_id=query.after_id, limit=query.limit)
    events = [JobEvent.model_validate(e) for e in found]
    return json_response(JobEventList(events))


@route(
    "/jobs/<uuid:job_id>/retry/",
    "POST",
    summary="Retry a failed job",
    replies={
        200: Reply("Requeued: the job, attempts reset.", Job),
        409: Reply("The job is not failed.", Conflict),
    },
)
def job_retry(job_id: uuid.UUID) -> Response:
    """failed -> queued with attempts reset and available now (event `manual_retry`). Any
    other status: 409 naming it. No body is needed."""
    outcome = actions.run_one("retry", job_id, event_data=audit_data())
    if outcome.status is None:
        raise ApiError(404, "Not found.")
    if outcome.changed and outcome.job is not None:
        return json_response(Job.model_validate(outcome.job))
    raise ApiError(
        409, f"Only failed jobs can be retried; this job is {outcome.status}.", status=outcome.status
    )


@route(
    "/job-events/",
    "GET",
    summary="Global event feed",
    query=EventFeedQuery,
    replies={200: Reply("A page of events, newest first.", JobEventPage)},
)
@from_replica
def event_feed(query: EventFeedQuery) -> Response:
    """Cursor pages, newest first (default 50, at most 200). Follow `next` for older events:
    events that arrive meanwhile never shift a page, so each older event is seen once.
    `previous` leads to newer events. Filter by several `type`s (any of them) and leave types
    out with `exclude`; `next` and `previous` keep every filter."""
    limit, position = query.page_size, query.cursor
    before = position.position if position and position.direction == "before" else None
    after = position.position if position and position.direction == "after" else None
    page = read_jobs.list_events(
        limit=limit, before=before, after=after, types=query.type, exclude=query.exclude, job_id=query.job_id
    )
    ids = [event.id for event in page.results]
    older = newer = None
    if ids:
        older, newer = Cursor("before", ids[-1]), Cursor("after", ids[0])
    elif after is not None:  # an empty page of newer events: older ones start after `after`
        older = Cursor("before", min(after + 1, BIGINT_MAX))
    elif before is not None:  # an empty page of older events: newer ones start at `before`
        newer = Cursor("after", max(before - 1, 0))
    body = JobEventPage(
        next=feed_link(older, limit) if page.has_older else None,
        previous=feed_link(newer, limit) if page.has_newer else None,
        results=[JobEvent.model_validate(e) for e in page.results],
    )
    return json_response(body)
