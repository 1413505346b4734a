"""Workflow pages: the recent workflows with their progress, one workflow's graph (live while
it runs), and its two actions, cancel it and retry its failed jobs.

- ``GET /workflows/``: the workflows of the newest workflow jobs, each with its counts by
  state and a progress bar (``reads/workflows.recent``: bounded scan, capped counts).
- ``GET /workflows/<workflow>/``: its counts, and its graph drawn on the server as inline SVG
  (:mod:`.workflow_graph`) when it has at most ``draw_cap`` jobs, else a summary (counts per
  layer, type and state; read with the garbage collector held off, :func:`collector_paused`).
  htmx polls the same address for the fragment every few seconds
  while any job of it is queued or running; once every job has ended the poll is answered
  286, which stops it. An unknown workflow (or an id no workflow may have) is a 404.
- ``GET /workflows/<workflow>/?action=cancel|retry``: the dry run (operator): how many jobs
  the action would change, with a confirm button that POSTs (CSRF) to the page's address.
- ``POST /workflows/<workflow>/`` (operator, CSRF), ``action`` = ``cancel`` (every queued job
  of it, waiting ones included: ``dependents.cancel_workflow``) or ``retry`` (its failed
  jobs: ``dependents.retry_workflow``). The events record who (``audit_data``), as the
  job list's bulk actions do. The actions and the page share one address, so any workflow id,
  slashes included, names exactly one page.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import abort, current_app, flash, redirect, url_for
from htmx_flask import request
from werkzeug.wrappers import Response

from ..auth import Role
from ..config import settings_of
from ..store import reading
from ..store.lifecycle import dependents
from ..store.reads import workflows as read_workflows
from .blueprint import bp
from .forms import RetryForm
from .rendering import page_or_fragment
from .signin import audit_data, current_actor, operator_required
from .workflow_graph import DRAW_CAP, NODE_H, NODE_W, STATE_MARKS, bar, layout, summarise

ACTIONS = {"cancel": "Cancel the workflow", "retry": "Retry its failed jobs"}
STOP_POLLING = 286  # htmx stops polling an element answered with this status


def _known(workflow: str) -> str:
    """The workflow id from the path; one that no workflow may have is simply not found."""
    if dependents.workflow_problem(workflow):
        abort(404, description="No workflow has that id.")
    return workflow


@bp.get("/workflows/")
def workflow_list() -> str:
    settings = settings_of(current_app)
    try:
        with reading.time_limit(settings.dashboard_query_timeout_ms):
            found: list[tuple[str, read_workflows.Counts]] | None = read_workflows.recent()
    except reading.QueryTimeout:
        found = None
    rows = None if found is None else [(name, counts, bar(counts.as_dict())) for name, counts in found]
    return page_or_fragment(
        "jobqueue/workflows/list.html",
        "jobqueue/fragments/workflow_list.html",
        workflows=rows,
        scan=read_workflows.RECENT_SCAN,
        marks=STATE_MARKS,
    )


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off for a bounded burst of allocations: a summary
    reads up to ``MEMBERS_CAP`` rows as tuples and strings, and a full collection it would
    otherwise set off walks every object of the process (tens of milliseconds). Nothing it
    allocates forms a cycle; the collector runs again as soon as it ends."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def workflow_context(name: str, *, draw_cap: int | None = None) -> dict[str, Any]:
    """The page's figures: counts, the bar, and the graph (at most ``draw_cap`` jobs, default
    :data:`DRAW_CAP`) or the summary; 404 for a workflow with no job."""
    draw_cap = DRAW_CAP if draw_cap is None else draw_cap
    counts = read_workflows.counts(name, cap=read_workflows.PAGE_COUNT_CAP)
    if counts.total == 0:
        abort(404, description="No workflow has that id: it has no job (or retention deleted them all).")
    found = None
    if counts.total <= draw_cap:  # small: its jobs (and its counts again, in the same moment)
        found = read_workflows.workflow(name, cap=draw_cap + 1)
        counts = found.counts if found is not None else counts
    drawn = found is not None and found.complete and len(found.jobs) <= draw_cap
    live = counts.queued + counts.waiting + counts.running > 0
    summary = None
    if not drawn:
        with collector_paused():
            summary = summarise(read_workflows.members(name))
    return {
        "name": name,
        "counts": counts,
        "segments": bar(counts.as_dict()),
        "graph": layout(found.jobs) if drawn and found is not None else None,
        "summary": summary,
        "members_cap": read_workflows.MEMBERS_CAP,
        "count_cap": read_workflows.PAGE_COUNT_CAP,
        "draw_cap": draw_cap,
        "live": live,
        "marks": STATE_MARKS,
        "node_w": NODE_W,
        "node_h": NODE_H,
    }


def _dry_run(action: str, counts: read_workflows.Counts) -> dict[str, Any]:
    """How many jobs ``action`` would change now, and whether that many is past a cap."""
    if action == "cancel":
        return {"count": counts.queued + counts.waiting, "capped": counts.capped}
    count = counts.failed + counts.cancelled
    return {
        "count": min(count, dependents.WORKFLOW_RETRY_MAX),
        "capped": counts.capped or count > dependents.WORKFLOW_RETRY_MAX,
        "more_than_one_action": count > dependents.WORKFLOW_RETRY_MAX,
    }


@bp.get("/workflows/<path:workflow>/")
def workflow_page(workflow: str) -> Any:
    name = _known(workflow)
    action = request.args.get("action", "")
    if action and action not in ACTIONS:
        abort(400, description="No such workflow action: use cancel or retry.")
    if action and not current_actor().may(Role.OPERATOR):
        abort(403, description="Only an operator may cancel or retry a workflow.")
    context = workflow_context(name)
    if action:
        context.update(action=action, title=ACTIONS[action], **_dry_run(action, context["counts"]))
    html = page_or_fragment(
        "jobqueue/workflows/page.html", "jobqueue/fragments/workflow.html", form=RetryForm(), **context
    )
    if request.htmx and not context["live"]:
        return html, STOP_POLLING
    return html


@bp.post("/workflows/<path:workflow>/")
@operator_required
def workflow_action(workflow: str) -> Response:
    """Run ``action`` on the workflow (CSRF is checked app-wide before this runs)."""
    name = _known(workflow)
    action = request.form.get("action", "")
    if action not in ACTIONS:
        abort(400, description="No such workflow action: use cancel or retry.")
    if read_workflows.counts(name, cap=1).total == 0:
        abort(404, description="No workflow has that id: it has no job.")
    data = {**audit_data(), "workflow": name}
    if action == "cancel":
        message = f"Cancelled by {data.get('actor') or 'an operator'} (workflow {name})"
        changed = dependents.cancel_workflow(name, event_data=data, message=message)
        flash(f"Cancelled {changed:,} job{'s' if changed != 1 else ''} of the workflow.", "success")
    else:
        changed = dependents.retry_workflow(name, event_data=data)
        flash(
            f"Retried {changed:,} failed job{'s' if changed != 1 else ''}: "
            "each waits again for any parent not yet done.",
            "success",
        )
    return redirect(url_for("jobqueue_web.workflow_page", workflow=name), 303)
