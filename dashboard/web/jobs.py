"""Job pages: the filtered list, one job with its timeline, retry and create."""

from __future__ import annotations

import uuid
from typing import Any

from flask import abort, current_app, flash, redirect, render_template, url_for
from htmx_flask import make_response, request
from werkzeug.wrappers import Response

from ..config import settings_of
from ..config.rules import BIGINT_MAX, TIMELINE_EVENTS_MAX
from ..runtime import handlers
from ..runtime.failures import UNKNOWN_TYPE_PREFIX
from ..store.lifecycle import actions
from ..store.lifecycle import create as enqueue
from ..store.reads import jobs as read_jobs
from ..store.records import EventRecord, JobRecord
from ..store.states import LIVE, STATUSES, Status
from ..tracing import trace_id
from .blueprint import bp
from .forms import CreateJobForm, RetryForm
from .job_list import WAITING_CAP, list_page
from .job_panels import deleted_note, job_panels, running_owner
from .params import _int, job_filters, keyset_param
from .read_source import from_replica
from .rendering import is_htmx, now, page_or_fragment, refused_status, safe_next
from .signin import audit_data, operator_required
from .timeline import current_progress, fold, timeline_context

DETAIL_TARGET = "job-detail"  # the element id a retry from the detail page swaps


def _job_id(raw: str) -> uuid.UUID:
    """The job id from the path; anything that is not a UUID is simply not found."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        abort(404, description="No job has that id.")


def _timeline_or_404(job_id: uuid.UUID) -> read_jobs.JobTimeline:
    """The job and the newest :data:`TIMELINE_EVENTS_MAX` of its events, or 404."""
    timeline = read_jobs.job_timeline(job_id, limit=TIMELINE_EVENTS_MAX)
    if timeline is None:
        abort(404, description=deleted_note(job_id, settings_of(current_app).tz) or "No job has that id.")
    return timeline


@bp.get("/jobs/")
@from_replica
def job_list() -> tuple[str, int] | Response:
    """The job list; a refused filter is marked at its field (:func:`refused_status`)."""
    filters = job_filters(request.args)
    read = list_page(filters)  # q, "next to run" or newest first
    if read.single is not None and not is_htmx():  # a search that found one job opens it
        return redirect(url_for("jobqueue_web.job_detail", job_id=read.single), 303)
    html = page_or_fragment(
        "jobqueue/jobs/list.html",
        "jobqueue/fragments/job_list.html",
        filters=filters,
        page=read.page,
        statuses=STATUSES,
        notes=read.notes,
        excerpts=read.excerpts,
        keyset=keyset_param,
        newer=read.newer,
        payload_search=read.payload_search,
        waiting=read.waiting,
        waiting_cap=WAITING_CAP,
    )
    return html, refused_status(bool(filters.errors))


def type_note(job: JobRecord) -> str | None:
    """In words, why a job's type may have no handler, or ``None`` when nothing needs saying.

    The API accepts any type (unless ``JOB_TYPES_STRICT``), so a job may name a type that no
    worker handles yet: each attempt then fails with ``UnknownJobType``, retried with backoff
    until it fails for good. The note says so when the last attempt failed that way, or when
    the type is not registered in this (web) process and the job is still to run.
    """
    unknown_error = job.last_error.startswith(UNKNOWN_TYPE_PREFIX)
    if unknown_error:
        ending = (
            "It failed for good: once a worker that handles the type runs, retry it."
            if job.status == Status.FAILED
            else "It is retried with backoff while attempts remain, then fails."
        )
        return (
            f"The worker that ran the last attempt has no handler registered for the type "
            f"“{job.type}”, so the attempt failed. {ending} Handlers register with @handler(…) in a "
            "module named in the worker's JOB_HANDLER_MODULES."
        )
    if job.type not in handlers.registered_types() and job.status in LIVE:
        return (
            f"The type “{job.type}” is not registered in the web process. That is allowed (workers "
            "may be deployed separately), but a worker with no handler for it fails each attempt."
        )
    return None


def trace_link(traceparent: str | None, template: str | None) -> tuple[str, str | None] | None:
    """The trace id of a job's ``traceparent`` and its link through ``TRACE_URL_TEMPLATE``
    (``None`` when unset), or ``None`` for a job created outside any trace."""
    found = trace_id(traceparent)
    if found is None:
        return None
    return found, template.replace("{trace_id}", found) if template else None


def detail_context(
    timeline: read_jobs.JobTimeline,
    notices: list[tuple[str, str]] | None = None,
    *,
    extras: bool = True,
    progress_from: list[EventRecord] | None = None,
) -> dict[str, Any]:
    """The job page's context; ``extras=False`` (the live poll, which renders only the header)
    skips the why-not-running read. ``progress_from``: the events the current progress is read
    from (default: the timeline's)."""
    job = timeline.job
    running = job.status == Status.RUNNING
    lease_left = (job.locked_until - now()).total_seconds() if running and job.locked_until else None
    # A window of the newest events: the poll starts from the window's first event, never from
    # the job's first, so it reads at most the window plus what is new.
    start = timeline.events[0].id - 1 if timeline.older and timeline.events else 0
    return {
        **timeline_context(timeline.events, start),
        "older_events": timeline.older,
        "job": job,
        "live": job.status in LIVE,
        "lease_seconds_left": lease_left,
        "owner": running_owner(job),  # does its owner still send heartbeats, when is it recovered
        "progress": current_progress(job, timeline.events if progress_from is None else progress_from),
        "retry_form": RetryForm(),
        "notices": notices or [],
        "type_note": type_note(job),
        "trace": trace_link(job.traceparent, settings_of(current_app).ops.trace_url_template),
        # Why a queued job is not running, each attempt's error, cancel and run now.
        **(job_panels(job, timeline.events) if extras else {}),
    }


@bp.get("/jobs/<job_id>/")
def job_detail(job_id: str) -> str:
    timeline = _timeline_or_404(_job_id(job_id))
    return page_or_fragment(
        "jobqueue/jobs/detail.html", "jobqueue/fragments/job_detail.html", **detail_context(timeline)
    )


@bp.post("/jobs/<job_id>/retry/")
@operator_required
def job_retry(job_id: str) -> str | Response:
    """failed -> queued (``store/lifecycle/actions.py``). CSRF is checked app-wide before this runs."""
    job_uuid = _job_id(job_id)
    form = RetryForm()
    outcome = actions.run_one("retry", job_uuid, event_data=audit_data())
    if outcome.status is None:
        abort(404, description="No job has that id.")
    if outcome.changed:
        notice = ("success", "Job queued again: it will run as soon as a worker is free.")
    else:
        notice = ("warning", f"Nothing changed: the job is {outcome.status} now, not failed.")
    if is_htmx():
        if request.htmx.target == DETAIL_TARGET:
            timeline = _timeline_or_404(job_uuid)  # one read: the job, its events, its progress
            return render_template("jobqueue/fragments/job_detail.html", **detail_context(timeline, [notice]))
        return render_template("jobqueue/fragments/retry_result.html", job_id=job_uuid, notice=notice)
    flash(notice[1], notice[0])
    target = safe_next(form.next.data) or url_for("jobqueue_web.job_detail", job_id=job_uuid)
    return redirect(target, 303)


def _create_form() -> CreateJobForm:
    form = CreateJobForm()
    form.known_types = tuple(handlers.registered_types())
    form.types_strict = settings_of(current_app).job_types_strict
    form.time_zone = settings_of(current_app).tz
    if not form.is_submitted():
        form.max_attempts.data = settings_of(current_app).worker.max_attempts_default
    return form


@bp.route("/jobs/new/", methods=["GET", "POST"])
@operator_required
def job_new() -> str | Response | tuple[str, int]:
    form = _create_form()
    if form.validate_on_submit():
        try:
            spec = form.job_spec(now(), handlers.handler_queue)
            outcome = enqueue.create_job(spec, event_data=audit_data())
        except ValueError as exc:  # the store's own checks (an unknown parent); at its field
            form.store_refused(exc)
        else:
            if outcome.created:
                flash("Job created.", "success")
            else:
                held = spec.unique_key is not None and outcome.job.unique_key == spec.unique_key
                flash(
                    f"A job with this {'unique' if held else 'idempotency'} key already exists: here it is.",
                    "info",
                )
            target = url_for("jobqueue_web.job_detail", job_id=outcome.job.id)
            if is_htmx():
                navigate: Response = make_response("", 204, redirect=target)
                return navigate
            return redirect(target, 303)
    # A refused form is a 400 for browsers; htmx only swaps 2xx answers, so it gets a 200.
    status = 400 if form.is_submitted() and not is_htmx() else 200
    html = page_or_fragment(
        "jobqueue/jobs/new.html",
        "jobqueue/fragments/job_form.html",
        form=form,
        types=handlers.registered_types(),
        time_zone=settings_of(current_app).time_zone,
    )
    return html, status


@bp.get("/jobs/<job_id>/live/")
def job_live(job_id: str) -> Any:
    """The polled part of a live job's page: the header, plus (out of band) the events after
    ``after`` and the folded tail. A status change sends the whole detail instead."""
    job_uuid = _job_id(job_id)
    errors: dict[str, str] = {}
    after = _int(request.args, "after", errors, minimum=0, maximum=BIGINT_MAX) or 0
    shown_status = request.args.get("status", "")
    job = read_jobs.get_job(job_uuid)
    # More than a window behind, the page is sent again instead (its own window of the newest
    # events), so a poll never reads a long job's whole timeline, nor a window it would drop.
    current = job is not None and job.status == shown_status and not errors
    newer = read_jobs.events_within(job_uuid, after_id=after, window=TIMELINE_EVENTS_MAX) if current else None
    if job is None or newer is None:
        timeline = _timeline_or_404(job_uuid)
        html = render_template("jobqueue/fragments/job_detail.html", **detail_context(timeline))
        response = make_response(html, 200, retarget="#job-detail")
        response.headers["HX-Reswap"] = "morph"  # idiomorph; htmx-flask knows only htmx's own swaps
        return response
    folded = fold(newer, after)
    context = detail_context(read_jobs.JobTimeline(job=job, events=[]), extras=False, progress_from=newer)
    context.update(new_items=folded.items, tail=folded.tail, last_event_id=folded.last_id)
    return render_template("jobqueue/jobs/live.html", **context)
