"""Issue 17's API extensions: ``q`` on the job list, and bulk retry, cancel and run-now.

``POST /api/jobs/bulk-retry/``, ``/bulk-cancel/``, ``/bulk-run-now/`` take the job list's
filters (``status``, ``type``, ``q``) and ``dry_run``; the dry run answers how many jobs the
action would change, the real one how many it changed (in chunks, one event per job, see
``store/bulk.py``). They write through ``store/service.py`` only.
"""

from __future__ import annotations

from typing import Literal

from flask import Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from ..store import search, service
from ..store.bulk import ACTION_STATUS
from .access import audit_data
from .blueprint import routes
from .errors import validation_error
from .inputs import SearchText, TypeFilter
from .registry import Reply
from .views import json_response


class BulkAction(BaseModel):
    """Body of `POST /api/jobs/bulk-cancel/` and `/bulk-run-now/` (queued jobs)."""

    model_config = ConfigDict(extra="forbid", title="BulkAction")

    dry_run: StrictBool = Field(description="true: only count the jobs the action would change.")
    status: Literal["queued"] | None = Field(default=None, description="The action's own status, if given.")
    type: TypeFilter | None = Field(default=None, description="Case-insensitive substring of the job type.")
    q: SearchText | None = Field(default=None, description="A search, as `q` on GET /api/jobs/.")


class BulkRetry(BulkAction):
    """Body of `POST /api/jobs/bulk-retry/` (failed jobs)."""

    model_config = ConfigDict(extra="forbid", title="BulkRetry")

    status: Literal["failed"] | None = Field(  # type: ignore[assignment]
        default=None, description="The action's own status, if given."
    )


class BulkAnswer(BaseModel):
    """How many jobs the action changed, or with `dry_run` would change."""

    action: Literal["retry", "cancel", "run_now"]
    dry_run: bool
    count: int = Field(description="Jobs changed, or with dry_run selected now.")


def _bulk(action: str, body: BulkAction | BulkRetry) -> Response:
    wanted = ACTION_STATUS[action]
    if body.status is not None and body.status != wanted:
        raise validation_error({"status": [f"This action only touches {wanted} jobs."]})
    terms = search.parse_api_q(body.q) if body.q else None
    selection = service.BulkSelection(type=body.type or None, terms=terms)
    if body.dry_run:
        count = service.bulk_dry_run(action, selection)
    else:
        count = service.bulk_apply(action, selection, event_data=audit_data()).changed
    return json_response(BulkAnswer(action=action, dry_run=body.dry_run, count=count))  # type: ignore[arg-type]


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
    in chunks of a few hundred jobs per transaction. Extension (issue 17)."""
    return _bulk("retry", body)


@routes.route(
    "/jobs/bulk-cancel/",
    "POST",
    summary="Cancel every queued job a filter selects",
    body=BulkAction,
    replies=_REPLIES,
)
def bulk_cancel(body: BulkAction) -> Response:
    """queued -> failed with `last_error` "Cancelled by <actor>" (event `cancelled` per job, an
    extension beside the reference's nine event types). Extension (issue 17)."""
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
    (event `rescheduled` per job, its data holding `was_available_at`; an extension beside the
    reference's nine event types). Extension (issue 17)."""
    return _bulk("run_now", body)
