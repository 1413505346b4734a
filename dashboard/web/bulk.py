"""Bulk actions on what the job list's filter selects, and their single-job buttons (issue 17).

Every action is two steps that work without JavaScript: ``GET /jobs/bulk/<action>/`` is the dry
run (how many jobs it will touch, with a confirm button), and the confirm button POSTs (CSRF
token) to the same address, which runs it through ``store/service.py`` in chunks. Viewers see no
buttons and both steps refuse them (403).
"""

from __future__ import annotations

from flask import abort, flash, redirect, render_template, url_for
from htmx_flask import request
from werkzeug.wrappers import Response

from ..store import search, service
from ..store.bulk import ACTION_STATUS
from .blueprint import bp
from .forms import RetryForm
from .jobs import _job_id
from .params import JobFilters, job_filters
from .signin import audit_data, operator_required

SLUGS = {"retry": "retry", "cancel": "cancel", "run-now": "run_now"}
TITLES = {"retry": "Retry failed jobs", "cancel": "Cancel queued jobs", "run_now": "Run waiting jobs now"}
DONE = {"retry": "Retried {n}.", "cancel": "Cancelled {n}.", "run_now": "Made {n} due now."}


def _action(slug: str) -> str:
    if slug not in SLUGS:
        abort(404, description="No such bulk action: use retry, cancel or run-now.")
    return SLUGS[slug]


def _selection(action: str, filters: JobFilters) -> service.BulkSelection | None:
    """The selection, or None with ``filters.errors`` saying why it cannot be used."""
    wanted = ACTION_STATUS[action]
    if filters.status and filters.status != wanted:
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
    return service.BulkSelection(type=filters.type or None, terms=terms)


@bp.route("/jobs/bulk/<slug>/", methods=["GET", "POST"])
@operator_required
def bulk_action(slug: str) -> str | Response | tuple[str, int]:
    action = _action(slug)
    source = request.form if request.method == "POST" else request.args
    filters = job_filters(source)
    selection = _selection(action, filters)
    form = RetryForm()
    back = url_for("web.job_list", **filters.query(offset=0))
    if request.method == "POST" and selection is not None:
        outcome = service.bulk_apply(action, selection, event_data=audit_data())
        noun = "job" if outcome.changed == 1 else "jobs"
        flash(DONE[action].format(n=f"{outcome.changed:,} {noun}"), "success")
        return redirect(back, 303)
    count = service.bulk_dry_run(action, selection) if selection is not None else None
    html = render_template(
        "jobs/bulk_confirm.html",
        action=action,
        slug=slug,
        title=TITLES[action],
        filters=filters,
        count=count,
        form=form,
        back=back,
        status=ACTION_STATUS[action],
    )
    return html, 400 if selection is None else 200


def _one(action: str, job_id: str) -> Response:
    job_uuid = _job_id(job_id)
    if action == "cancel":
        outcome = service.cancel_job(job_uuid, event_data=audit_data())
    else:
        outcome = service.run_job_now(job_uuid, event_data=audit_data())
    if outcome.status is None:
        abort(404, description="No job has that id.")
    if outcome.changed:
        flash(
            "Job cancelled." if action == "cancel" else "Job made due now: it runs when a worker is free.",
            "success",
        )
    else:
        flash(f"Nothing changed: the job is {outcome.status} now.", "warning")
    return redirect(url_for("web.job_detail", job_id=job_uuid), 303)


@bp.post("/jobs/<job_id>/cancel/")
@operator_required
def job_cancel(job_id: str) -> Response:
    return _one("cancel", job_id)


@bp.post("/jobs/<job_id>/run-now/")
@operator_required
def job_run_now(job_id: str) -> Response:
    return _one("run_now", job_id)
