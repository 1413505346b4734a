"""`/api/workflows/{workflow}/`: one workflow's jobs and counts, and the operator's cancel and
retry of the whole of it.

A workflow is the jobs created with the same ``workflow`` id (or that joined their first
parent's). The read is bounded: the counts read each state's index entries up to the store's
cap, the jobs at most ``reads.workflows.WORKFLOW_JOBS_CAP`` of them, and the answer says when
either stopped short. The actions go through ``store/lifecycle/dependents.py`` and record the
actor in each changed job's event (``cancelled``, ``manual_retry``), as the bulk actions do;
``?dry_run=true`` answers what they would change and changes nothing.

An id that no workflow can have (empty, too long, a control character) is a 400 naming
``workflow``; one that no job has is a 404.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from flask import Response
from pydantic import BaseModel, ConfigDict, Field

from ..config.rules import WORKFLOW_MAX_LENGTH
from ..store.lifecycle import dependents
from ..store.reads import workflows as read_workflows
from ..store.states import Status
from ..store.values import pg_safe
from .access import audit_data
from .blueprint import routes
from .errors import ApiError, validation_error
from .jobs import json_response
from .outputs import Error, Parents, Timestamp
from .registry import Reply

route = routes.route
JOBS_MAX = read_workflows.WORKFLOW_JOBS_CAP
COUNT_CAP = read_workflows.WORKFLOW_COUNT_CAP
RETRY_MAX = dependents.WORKFLOW_RETRY_MAX
BAD_ID = Reply(f"Not a workflow id (1 to {WORKFLOW_MAX_LENGTH} visible characters): see `errors`.", Error)
UNKNOWN = Reply("No job belongs to this workflow.", Error)
State = Literal["queued", "waiting", "running", "succeeded", "failed", "cancelled"]


class WorkflowJob(BaseModel):
    """One job of a workflow, as its graph needs it; `GET /api/jobs/{id}/` has the rest."""

    id: uuid.UUID
    type: str
    status: Status
    state: State = Field(
        description="`status`, with `waiting` (queued for its parents) and `cancelled` told apart."
    )
    depends_on: Parents = Field(description="Its parents' ids ([]: none).")
    on_parent_failure: Literal["cancel", "run", "wait"] | None
    waiting_on: int = Field(description="Parents it still waits for.")
    finished_at: Timestamp | None


class WorkflowCounts(BaseModel):
    """Its jobs by state: `queued` is ready, scheduled or backing off; `waiting` waits for
    parents; `failed` leaves out `cancelled`."""

    queued: int
    waiting: int
    running: int
    succeeded: int
    failed: int
    cancelled: int


class Workflow(BaseModel):
    """A workflow: its counts, and its jobs up to a cap."""

    model_config = ConfigDict(extra="forbid")

    workflow: str
    counts: WorkflowCounts
    total: int = Field(description="The sum of `counts`.")
    counts_exact: bool = Field(
        description=f"False: a count reached {COUNT_CAP:,} (the cap each reads), and there are more."
    )
    jobs: list[WorkflowJob] = Field(description=f"Its jobs, oldest first: at most {JOBS_MAX}.")
    jobs_max: int = Field(description="The most jobs `jobs` lists.")
    truncated: bool = Field(description="It has more jobs than `jobs` lists (see `counts`).")


class WorkflowActionQuery(BaseModel):
    """Query of the workflow actions."""

    model_config = ConfigDict(title="WorkflowActionQuery")

    dry_run: bool = Field(default=False, description="true: only count the jobs the action would change.")


class WorkflowAnswer(BaseModel):
    """How many jobs the action changed, or with `dry_run` would change."""

    workflow: str
    action: Literal["cancel", "retry"]
    dry_run: bool
    count: int = Field(description="Jobs changed, or with dry_run the jobs it would change now.")
    exact: bool = Field(
        description="False (a dry run only): a count it read reached its cap, and it would change more."
    )


def _checked(workflow: str) -> str:
    if problem := dependents.workflow_problem(workflow):
        raise validation_error({"workflow": [f"A workflow id {problem}."]})
    return workflow


def _counts_or_404(workflow: str) -> read_workflows.Counts:
    counts = read_workflows.counts(_checked(workflow))
    if counts.total == 0:
        raise ApiError(404, "No such workflow: no job belongs to it.")
    return counts


def _job(node: read_workflows.Node) -> WorkflowJob:
    return WorkflowJob(
        id=node.id,
        type=node.type,
        status=Status(node.status),
        state=node.state,  # type: ignore[arg-type]
        depends_on=list(node.depends_on),
        on_parent_failure=node.on_parent_failure,  # type: ignore[arg-type]
        waiting_on=node.waiting_on,
        finished_at=node.finished_at,
    )


@route(
    "/workflows/<workflow>/",
    "GET",
    summary="One workflow",
    tag="workflows",
    replies={200: Reply("Its counts and jobs.", Workflow), 400: BAD_ID, 404: UNKNOWN},
)
def workflow_detail(workflow: str) -> Response:
    """Its jobs (id, type, status, parents), oldest first, and their counts by state. Bounded:
    at most 500 jobs (`truncated` says there are more) and each count read up to 100,000
    (`counts_exact`). The id is one path segment, percent-encoded (`nightly%20run`); an id
    holding `/` cannot be named here."""
    found = read_workflows.workflow(_checked(workflow), cap=JOBS_MAX)
    if found is None:
        raise ApiError(404, "No such workflow: no job belongs to it.")
    counts = found.counts
    jobs = [_job(node) for node in found.jobs]
    return json_response(
        Workflow(
            workflow=found.name,
            counts=WorkflowCounts(**counts.as_dict()),
            total=counts.total,
            counts_exact=not counts.capped,
            jobs=jobs,
            jobs_max=JOBS_MAX,
            truncated=counts.capped or counts.total > len(jobs),
        )
    )


def _event_data(workflow: str) -> dict[str, Any]:
    return {**audit_data(), "workflow": workflow}


_ACTION_REPLIES = {
    200: Reply("The count (dry run) or the number of jobs changed.", WorkflowAnswer),
    400: BAD_ID,
    404: UNKNOWN,
}


@route(
    "/workflows/<workflow>/cancel/",
    "POST",
    summary="Cancel a workflow",
    query=WorkflowActionQuery,
    tag="workflows",
    replies=_ACTION_REPLIES,
)
def workflow_cancel(workflow: str, query: WorkflowActionQuery) -> Response:
    """Every queued job of it, waiting ones included, becomes failed with `last_error`
    "Cancelled by <actor>" (event `cancelled` per job, the actor and the workflow in its
    data); running jobs finish their attempt, and a dependent of a cancelled job follows its
    `on_parent_failure`. `?dry_run=true`: how many it would cancel now. No body is needed."""
    counts = _counts_or_404(workflow)
    if query.dry_run:
        count, exact = counts.queued + counts.waiting, not counts.capped
    else:
        data = _event_data(workflow)
        message = pg_safe(f"Cancelled by {data.get('actor') or 'an operator'}")
        count, exact = dependents.cancel_workflow(workflow, event_data=data, message=message), True
    return json_response(
        WorkflowAnswer(workflow=workflow, action="cancel", dry_run=query.dry_run, count=count, exact=exact)
    )


@route(
    "/workflows/<workflow>/retry/",
    "POST",
    summary="Retry a workflow's failed jobs",
    query=WorkflowActionQuery,
    tag="workflows",
    replies=_ACTION_REPLIES,
)
def workflow_retry(workflow: str, query: WorkflowActionQuery) -> Response:
    """Its failed jobs, cancelled ones included, go back to queued with attempts reset (event
    `manual_retry` per job, the actor and the workflow in its data), at most 10,000 per call
    (call again for more). A retried job whose parents have not all succeeded waits for them
    again, so a failed chain runs again from its first failure and the dependents waiting
    on a retried job are released as it succeeds. `?dry_run=true`: how many it would retry
    now. No body is needed."""
    counts = _counts_or_404(workflow)
    if query.dry_run:
        failed = counts.failed + counts.cancelled
        count, exact = min(failed, RETRY_MAX), not counts.capped
    else:
        count, exact = dependents.retry_workflow(workflow, event_data=_event_data(workflow)), True
    return json_response(
        WorkflowAnswer(workflow=workflow, action="retry", dry_run=query.dry_run, count=count, exact=exact)
    )
