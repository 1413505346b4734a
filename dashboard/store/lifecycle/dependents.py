"""Jobs that wait for other jobs: creating them, and the workflow actions.

A job with ``depends_on`` is created in one transaction with its parents locked
(``lock_parents``, dependents.sql), so a parent that settles at the same moment is either seen
settled here or sees the new job from its release trigger (migration 0018). Then it is:

- *cancelled at birth* when a parent already failed and ``on_parent_failure`` is ``cancel``;
- *ready* when every parent is done (succeeded; under ``run``, ended);
- otherwise *waiting*: queued, ``available_at`` = ``states.WAITING_AT``, ``waiting_on`` the
  parents not yet done, its own ``available_at`` (if later) kept as ``not_before``; with more
  than one, that count is also kept apart (``jobs_job_waiting``, migration 0025), where the
  settles of its parents but the last take one off without writing the job's row.

The release itself is the trigger's, in the statement that settles the last parent: the
worker's settles do not name it, so a job nobody waits for settles exactly as before.

A ``workflow`` groups jobs for the pages and the actions. A job with parents and no workflow
joins its first parent's; a first parent in none starts one, named by its id.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ...config.rules import (
    DEFAULT_QUEUE,
    PARENT_FAILURE_POLICIES,
    PARENTS_MAX,
    WORKFLOW_MAX_LENGTH,
    text_kind,
    type_problem,
)
from ..connection import autocommit, autocommits, fetch_rows, fetch_rows_within, transaction
from ..records import CreateResult, JobRecord
from ..sql import query
from ..states import WAITING_AT
from ..values import aware, utcnow
from .spec import JobSpec

LOCK_PARENTS, CREATE_DEPENDENT = query("lock_parents"), query("create_dependent")
FIND_BY_IDEMPOTENCY_KEY = query("find_by_idempotency_key")
CANCEL_WORKFLOW, WORKFLOW_FAILED_IDS, RETRY = (
    query("cancel_workflow"),
    query("workflow_failed_ids"),
    query("retry"),
)
WORKFLOW_RETRY_MAX = 10_000  # failed jobs one workflow retry takes (one statement)


def workflow_problem(value: str) -> str | None:
    """Why ``value`` is not a workflow id, or ``None``: 1 to 120 characters, none that a job
    type refuses (control and invisible formatting characters)."""
    if not 1 <= len(value) <= WORKFLOW_MAX_LENGTH:
        return f"must be 1 to {WORKFLOW_MAX_LENGTH} characters"
    if kind := text_kind(value):
        return f"must not contain a {kind} character"
    return type_problem(value)


def check(spec: JobSpec, index: int | None = None) -> None:
    """``ValueError`` naming the field for a spec's workflow fields out of their rules.
    ``index``: the spec's place in a create_jobs call (an int parent must be an earlier one)."""
    parents = spec.depends_on
    if len(parents) > PARENTS_MAX:
        raise ValueError(f"depends_on may name at most {PARENTS_MAX} jobs")
    if len(set(parents)) != len(parents):
        raise ValueError("depends_on names a job twice")
    for parent in parents:
        if isinstance(parent, int) and not isinstance(parent, bool):
            if index is None or not 0 <= parent < index:
                raise ValueError(f"depends_on: {parent} is not an earlier job of the same call")
        elif not isinstance(parent, uuid.UUID):
            raise ValueError(f"depends_on: {parent!r} is not a job id")
    policy = spec.on_parent_failure
    if policy is not None and policy not in PARENT_FAILURE_POLICIES:
        raise ValueError(f"on_parent_failure must be one of {', '.join(PARENT_FAILURE_POLICIES)}")
    if policy is not None and not parents:
        raise ValueError("on_parent_failure needs depends_on")
    if spec.workflow is not None and (problem := workflow_problem(spec.workflow)):
        raise ValueError(f"workflow {problem}")


def create_dependent(
    conn: Connection,
    spec: JobSpec,
    parents: Sequence[uuid.UUID],
    *,
    event_data: dict[str, Any],
    now: datetime,
) -> CreateResult:
    """Create ``spec`` waiting for ``parents`` (ids, in its order) in ``conn``'s open transaction
    (a caller's, or :func:`connection.transaction`'s); ``ValueError`` naming an unknown parent."""
    within = not autocommits(conn)
    fetch = fetch_rows_within if within else fetch_rows
    first = parents[0]
    adopt = None if spec.workflow is not None else str(first)
    rows = fetch(conn, LOCK_PARENTS, {"ids": list(parents), "first": first, "adopt": adopt})
    found = {row["id"]: row for row in rows}
    missing = [str(parent) for parent in parents if parent not in found]
    if missing:
        raise ValueError(f"depends_on: no job {missing[0]}")
    policy = spec.on_parent_failure or "cancel"
    failed = [parent for parent in parents if found[parent]["status"] == "failed"]
    if policy == "run":
        waiting_on = sum(found[parent]["status"] in ("queued", "running") for parent in parents)
    else:
        waiting_on = sum(found[parent]["status"] != "succeeded" for parent in parents)
    cancelled = bool(failed) and policy == "cancel"
    wanted = spec.available_at or now
    status, last_error = "queued", ""
    if cancelled:
        status, last_error, waiting_on = "failed", f"Cancelled: parent {failed[0]} failed", 0
    waits = waiting_on > 0 and not cancelled
    params = {
        "id": uuid.uuid4(),
        "type": spec.type,
        "payload": {} if spec.payload is None else spec.payload,
        "status": status,
        "priority": spec.priority,
        "available_at": WAITING_AT if waits else wanted,
        "max_attempts": spec.max_attempts,
        "idempotency_key": spec.idempotency_key,
        "last_error": last_error,
        "queue": spec.queue or DEFAULT_QUEUE,
        "depends_on": list(parents),
        "on_parent_failure": policy,
        "workflow": spec.workflow or found[first]["workflow"] or adopt,
        "waiting_on": waiting_on,
        "not_before": spec.available_at if waits and spec.available_at and spec.available_at > now else None,
        "failed_parent": str(failed[0]) if cancelled else None,
        "traceparent": spec.traceparent,
        "event_data": {"type": spec.type, **event_data, "depends_on": [str(parent) for parent in parents]},
        "now": now,
    }
    created = fetch(conn, CREATE_DEPENDENT, params)
    if created:
        return CreateResult(job=JobRecord.from_row(created[0]), created=True)
    existing = fetch(conn, FIND_BY_IDEMPOTENCY_KEY, {"idempotency_key": spec.idempotency_key})
    if not existing:
        raise RuntimeError("idempotency key conflict with a job that no longer exists")
    return CreateResult(job=JobRecord.from_row(existing[0]), created=False)


def create_one(
    spec: JobSpec,
    *,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
    within: Connection | None = None,
) -> CreateResult:
    """``create.create_job`` for a spec with parents (job ids): one transaction of its own on
    ``conn`` (or a fresh connection), or the caller's ``within``."""
    check(spec)
    now = aware(now or utcnow(), "now")
    parents = [parent for parent in spec.depends_on if isinstance(parent, uuid.UUID)]
    if len(parents) != len(spec.depends_on):
        raise ValueError("depends_on: a single create names parents by job id")
    if within is not None:
        return create_dependent(within, spec, parents, event_data=event_data or {}, now=now)
    with autocommit(conn) as conn, transaction(conn):
        return create_dependent(conn, spec, parents, event_data=event_data or {}, now=now)


def cancel_workflow(
    workflow: str, *, event_data: dict[str, Any], message: str, now: datetime | None = None
) -> int:
    """Cancel every queued job of ``workflow``, waiting ones included; how many. Running jobs
    finish their attempt; each cancelled job's dependents follow their policies."""
    params = {
        "workflow": workflow,
        "event_data": event_data,
        "message": message,
        "now": aware(now or utcnow(), "now"),
    }
    with autocommit(None) as conn:
        return len(fetch_rows(conn, CANCEL_WORKFLOW, params))


def retry_workflow(workflow: str, *, event_data: dict[str, Any], now: datetime | None = None) -> int:
    """Retry the failed jobs of ``workflow`` (at most :data:`WORKFLOW_RETRY_MAX`) in one
    statement; how many. A retried job whose parents are not all done waits for them again,
    a parent retried with it included, so a failed chain runs again from its first failure."""
    moment = aware(now or utcnow(), "now")
    with autocommit(None) as conn, transaction(conn):
        ids = [
            row["id"]
            for row in fetch_rows(
                conn, WORKFLOW_FAILED_IDS, {"workflow": workflow, "limit": WORKFLOW_RETRY_MAX}
            )
        ]
        if not ids:
            return 0
        params = {"ids": ids, "now": moment, "event_data": event_data}
        return len(fetch_rows(conn, RETRY, params))
