"""The API's operator actions: bulk retry, cancel, run-now and delete, and single delete.

``POST /api/jobs/bulk-retry/``, ``/bulk-cancel/``, ``/bulk-run-now/`` and ``/bulk-delete/``
take the job list's filters (``status``, ``type``, ``q``, ``cancelled``) and ``dry_run``; the
dry run answers how many jobs the action would change, the real one how many it changed (in
chunks, one event per job, or for a delete one audit row per job, see ``store/bulk.py``). A
bulk retry leaves cancelled jobs out unless its body asks (``cancelled: true`` for them only,
``include_cancelled: true`` for both).

``DELETE /api/jobs/{id}/`` deletes one finished job: 204, 404 for an unknown id, 409 for a job
that is not finished (as a retry of a job that is not failed). There is no dry run of one job:
``GET /api/jobs/{id}/`` shows whether it is finished. They write through ``store/lifecycle/actions.py``.
"""

from __future__ import annotations

import uuid
from typing import Literal

from flask import Response, current_app
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from ..store.lifecycle import actions
from ..store.lifecycle.actions import ACTION_STATUS
from ..store.reads import search
from .access import audit_data
from .blueprint import routes
from .errors import ApiError, validation_error
from .jobs import json_response
from .outputs import Conflict
from .queries import SearchText, TypeFilter
from .registry import Reply


class BulkAction(BaseModel):
    """Body of `POST /api/jobs/bulk-cancel/` and `/bulk-run-now/` (queued jobs)."""

    model_config = ConfigDict(extra="forbid", title="BulkAction")

    dry_run: StrictBool = Field(description="true: only count the jobs the action would change.")
    status: Literal["queued"] | None = Field(default=None, description="The action's own status, if given.")
    type: TypeFilter | None = Field(default=None, description="Case-insensitive substring of the job type.")
    q: SearchText | None = Field(default=None, description="A search, as `q` on GET /api/jobs/.")


class BulkRetry(BulkAction):
    """Body of `POST /api/jobs/bulk-retry/` (failed jobs; cancelled ones only when asked)."""

    model_config = ConfigDict(extra="forbid", title="BulkRetry")

    status: Literal["failed"] | None = Field(  # type: ignore[assignment]
        default=None, description="The action's own status, if given."
    )
    cancelled: StrictBool | None = Field(
        default=None,
        description="true: only jobs an operator cancelled; false or null: none (unless include_cancelled).",
    )
    include_cancelled: StrictBool = Field(
        default=False, description="true: retry cancelled jobs too (with cancelled null)."
    )


class BulkDelete(BulkAction):
    """Body of `POST /api/jobs/bulk-delete/` (finished jobs: succeeded or failed)."""

    model_config = ConfigDict(extra="forbid", title="BulkDelete")

    status: Literal["succeeded", "failed"] | None = Field(  # type: ignore[assignment]
        default=None, description="succeeded or failed; null: both."
    )
    cancelled: StrictBool | None = Field(
        default=None, description="true: only cancelled jobs; false: none of them; null: either."
    )


class BulkAnswer(BaseModel):
    """How many jobs the action changed, or with `dry_run` would change."""

    action: Literal["retry", "cancel", "run_now", "delete"]
    dry_run: bool
    count: int = Field(description="Jobs changed, or with dry_run selected now.")


def _bulk(
    action: Literal["retry", "cancel", "run_now", "delete"], body: BulkAction | BulkRetry | BulkDelete
) -> Response:
    wanted = ACTION_STATUS[action]
    if wanted and body.status is not None and body.status != wanted:
        raise validation_error({"status": [f"This action only touches {wanted} jobs."]})
    terms = search.parse_api_q(body.q) if body.q else None
    selection = actions.Selection(
        type=body.type or None,
        terms=terms,
        status=body.status if action == "delete" else None,
        cancelled=getattr(body, "cancelled", None),
        include_cancelled=getattr(body, "include_cancelled", False),
    )
    if body.dry_run:
        count = actions.count(action, selection)
    else:
        count = actions.run(action, selection, event_data=audit_data()).changed
    return json_response(BulkAnswer(action=action, dry_run=body.dry_run, count=count))


_REPLIES = {200: Reply("The count (dry run) or the number of jobs changed.", BulkAnswer)}


@routes.route(
    "/jobs/bulk-retry/",
    "POST",
    summary="Retry every failed job a filter selects",
    body=BulkRetry,
    replies=_REPLIES,
)
def bulk_retry(body: BulkRetry) -> Response:
    """failed -> queued with attempts reset (event `manual_retry` per job, the actor in its data),
    in chunks of a few hundred jobs per transaction. Jobs an operator cancelled are left out
    unless asked for (`cancelled`, `include_cancelled`)."""
    return _bulk("retry", body)


@routes.route(
    "/jobs/bulk-cancel/",
    "POST",
    summary="Cancel every queued job a filter selects",
    body=BulkAction,
    replies=_REPLIES,
)
def bulk_cancel(body: BulkAction) -> Response:
    """queued -> failed with `last_error` "Cancelled by <actor>" (event `cancelled` per job; the
    job keeps a `cancelled_at` marker that lists and figures tell apart from failures)."""
    return _bulk("cancel", body)


@routes.route(
    "/jobs/bulk-run-now/",
    "POST",
    summary="Make every waiting queued job due now",
    body=BulkAction,
    replies=_REPLIES,
)
def bulk_run_now(body: BulkAction) -> Response:
    """Queued jobs whose `available_at` is later (scheduled, or backing off) become due now
    (event `rescheduled` per job, its data holding `was_available_at`)."""
    return _bulk("run_now", body)


@routes.route(
    "/jobs/bulk-delete/",
    "POST",
    summary="Delete every finished job a filter selects",
    body=BulkDelete,
    replies=_REPLIES,
)
def bulk_delete(body: BulkDelete) -> Response:
    """Succeeded and failed jobs (`status` narrows to one) are deleted with their events, in
    chunks of a few hundred per transaction; each leaves a row in the audit log (`/audit/`)
    naming the actor. Queued and running jobs are never deleted."""
    return _bulk("delete", body)


@routes.route(
    "/jobs/<uuid:job_id>/",
    "DELETE",
    summary="Delete a finished job",
    replies={
        204: Reply("Deleted, with its events (the audit log records it)."),
        409: Reply("The job is not finished.", Conflict),
    },
)
def job_delete(job_id: uuid.UUID) -> Response:
    """A succeeded or failed job is deleted with its events; the audit log keeps who did it.
    A queued or running job: 409 naming its status."""
    outcome = actions.run_one("delete", job_id, event_data=audit_data())
    if outcome.status is None:
        raise ApiError(404, "Not found.")
    if not outcome.changed:
        raise ApiError(
            409, f"Only finished jobs can be deleted; this job is {outcome.status}.", status=outcome.status
        )
    return current_app.response_class(status=204)
