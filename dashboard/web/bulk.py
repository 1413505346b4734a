"""Bulk actions on what the job list's filter selects, and their single-job buttons.

Every action is two steps that work without JavaScript: ``GET /jobs/bulk/<action>/`` is the dry
run (how many jobs it will touch, with a confirm button), and the confirm button POSTs (CSRF
token) to the same address, which runs it through ``store/lifecycle/actions.py`` in chunks. The same
holds for deleting one job (``/jobs/<id>/delete/``). Viewers see no buttons and both steps
refuse them (403).

A retry's dry run says how many cancelled jobs it leaves out (and offers to include them), and
warns when no live worker has a handler for a type it would retry, or no worker is alive.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flask import abort, flash, redirect, render_template, url_for
from htmx_flask import request
from werkzeug.wrappers import Response

from ..store.lifecycle import actions
from ..store.lifecycle.actions import ACTION_STATUS, FINISHED
from ..store.reads import capacity, search
from ..store.reads import jobs as read_jobs
from .blueprint import bp
from .forms import RetryForm
from .jobs import _job_id, _timeline_or_404
from .params import JobFilters, job_filters
from .rendering import now
from .signin import audit_data, operator_required

DRY_RUN_CAP = 10_000  # a dry run counts the jobs it would change up to this many ("more than")
EVENTS_COUNTED = 10_000  # the delete page counts a job's events up to this many
SLUGS = {"retry": "retry", "cancel": "cancel", "run-now": "run_now", "delete": "delete"}
TITLES = {
    "retry": "Retry failed jobs",
    "cancel": "Cancel queued jobs",
    "run_now": "Run waiting jobs now",
    "delete": "Delete finished jobs",
}
DONE = {
    "retry": "Retried {n}.",
    "cancel": "Cancelled {n}.",
    "run_now": "Made {n} due now.",
    "delete": "Deleted {n}.",
}


def _action(slug: str) -> str:
    if slug not in SLUGS:
        abort(404, description="No such bulk action: use retry, cancel, run-now or delete.")
    return SLUGS[slug]


def _selection(action: str, filters: JobFilters) -> actions.Selection | None:
    """The selection, or None with ``filters.errors`` saying why it cannot be used."""
    wanted = ACTION_STATUS[action]
    if action == "delete" and filters.status and filters.status not in FINISHED:
        filters.errors["status"] = f"Only finished jobs are deleted; the filter says {filters.status}."
    elif wanted and filters.status and filters.status != wanted:
        filters.errors["status"] = (
            f"This action only touches {wanted} jobs; the filter says {filters.status}."
        )
    terms = None
    if filters.q:
        try:
            terms = search.parse_q(filters.q)
        except search.SearchError as exc:
            filters.errors["q"] = str(exc)
    if filters.errors:
        return None
    return actions.Selection(
        type=filters.type or None,
        queue=filters.queue or None,
        terms=terms,
        status=filters.status or None if action == "delete" else None,
        cancelled=filters.cancelled,
        include_cancelled=filters.include_cancelled,
    )


def retry_notes(selection: actions.Selection) -> dict[str, Any]:
    """For a retry's dry run: the cancelled jobs it leaves out, and the types no live worker
    has a handler for (or whether no worker is alive at all)."""
    left_out = 0
    if selection.cancelled is None and not selection.include_cancelled:
        left_out = actions.count("retry", replace(selection, cancelled=True), cap=DRY_RUN_CAP)
    live = capacity.capacity(now())
    unhandled = [t for t in actions.types_with("failed", selection) if t not in live.types]
    return {"left_out": left_out, "alive": live.alive, "unhandled": unhandled}


@bp.route("/jobs/bulk/<slug>/", methods=["GET", "POST"])
@operator_required
def bulk_action(slug: str) -> str | Response | tuple[str, int]:
    action = _action(slug)
    source = request.form if request.method == "POST" else request.args
    filters = job_filters(source)
    selection = _selection(action, filters)
    form = RetryForm()
    back = url_for("jobqueue_web.job_list", **filters.query(offset=0))
    if request.method == "POST" and selection is not None:
        outcome = actions.run(action, selection, event_data=audit_data())
        noun = "job" if outcome.changed == 1 else "jobs"
        flash(DONE[action].format(n=f"{outcome.changed:,} {noun}"), "success")
        return redirect(back, 303)
    count = actions.count(action, selection, cap=DRY_RUN_CAP) if selection is not None else None
    notes = retry_notes(selection) if selection is not None and action == "retry" else {}
    html = render_template(
        "jobqueue/jobs/bulk_confirm.html",
        action=action,
        slug=slug,
        title=TITLES[action],
        filters=filters,
        count=count,
        cap=DRY_RUN_CAP,
        form=form,
        back=back,
        status=ACTION_STATUS[action] or filters.status or "succeeded or failed",
        **notes,
    )
    return html, 400 if selection is None else 200


def _one(action: str, job_id: str) -> Response:
    job_uuid = _job_id(job_id)
    outcome = actions.run_one(action, job_uuid, event_data=audit_data())
    if outcome.status is None:
        abort(404, description="No job has that id.")
    if outcome.changed:
        flash(
            "Job cancelled." if action == "cancel" else "Job made due now: it runs when a worker is free.",
            "success",
        )
    else:
        flash(f"Nothing changed: the job is {outcome.status} now.", "warning")
    return redirect(url_for("jobqueue_web.job_detail", job_id=job_uuid), 303)


@bp.post("/jobs/<job_id>/cancel/")
@operator_required
def job_cancel(job_id: str) -> Response:
    return _one("cancel", job_id)


@bp.post("/jobs/<job_id>/run-now/")
@operator_required
def job_run_now(job_id: str) -> Response:
    return _one("run_now", job_id)


@bp.route("/jobs/<job_id>/delete/", methods=["GET", "POST"])
@operator_required
def job_delete(job_id: str) -> str | Response:
    """GET: what deleting this job removes (the job and its events), with a confirm button.
    POST (CSRF): delete it if it is finished; the audit log records who did."""
    job_uuid = _job_id(job_id)
    if request.method == "POST":
        outcome = actions.run_one("delete", job_uuid, event_data=audit_data())
        if outcome.status is None:
            abort(404, description="No job has that id.")
        if outcome.changed:
            flash(f"Job {str(job_uuid)[:8]} deleted with its events; the audit log records it.", "success")
            return redirect(url_for("jobqueue_web.job_list"), 303)
        flash(f"Nothing deleted: the job is {outcome.status}; only finished jobs are deleted.", "warning")
        return redirect(url_for("jobqueue_web.job_detail", job_id=job_uuid), 303)
    job = read_jobs.get_job(job_uuid)
    if job is None:
        _timeline_or_404(job_uuid)  # the 404, saying who deleted it if the audit log knows
    events = read_jobs.count_events_after(0, job_id=job_uuid, cap=EVENTS_COUNTED + 1)
    return render_template(
        "jobqueue/jobs/delete_confirm.html",
        job=job,
        events=events,
        events_cap=EVENTS_COUNTED,
        form=RetryForm(),
    )
