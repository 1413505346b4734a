"""What a job to create is: :class:`JobSpec`, built by each door from its validated input."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, NamedTuple

from ...config.rules import DEFAULT_PRIORITY, DEFAULT_QUEUE
from ..records import JobRecord
from ..states import Status


class JobSpec(NamedTuple):
    """One job to create: what :func:`create_job` and :func:`create_jobs` take, built by each
    door from its validated input. Immutable; a named tuple rather than a frozen dataclass
    because a bulk create builds up to 1,000 of them per request, and a frozen dataclass
    costs several times as much to build (docs/benchmarks.md, "Bulk create, set 5"). Its
    values are checked when the job is created, not when the spec is built."""

    type: str
    payload: Any = None  # None: {}
    priority: int = DEFAULT_PRIORITY
    available_at: datetime | None = None  # None: now
    max_attempts: int = 3
    idempotency_key: str | None = None
    queue: str | None = None  # None: the default queue
    # Workflows (dependents.py): the parents, each a job id, or in a create_jobs call the
    # index of an earlier spec of the same call; what a parent's failure does (None: cancel);
    # the workflow (None: the first parent's).
    depends_on: tuple[uuid.UUID | int, ...] = ()
    on_parent_failure: str | None = None
    workflow: str | None = None
    # Uniqueness windows (unique.py): the key, its window in seconds (None: no limit), the
    # states it holds in (None: active, or queued with debounce), and the debounce in seconds.
    unique_key: str | None = None
    unique_for: float | None = None
    unique_while: str | None = None
    debounce: float | None = None
    traceparent: str | None = None  # the W3C trace context to continue (dashboard/tracing.py)


def row_params(spec: JobSpec, event_data: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """The parameters a create statement's new row and its ``created`` event take from
    ``spec`` (``create.sql``, ``unique.sql``): a fresh id, the defaults filled in."""
    return {
        "id": uuid.uuid4(),
        "type": spec.type,
        "payload": {} if spec.payload is None else spec.payload,
        "priority": spec.priority,
        "available_at": spec.available_at or now,
        "max_attempts": spec.max_attempts,
        "idempotency_key": spec.idempotency_key,
        "queue": spec.queue or DEFAULT_QUEUE,
        "workflow": spec.workflow,
        "traceparent": spec.traceparent,
        "event_data": {"type": spec.type, **(event_data or {})},
        "now": now,
    }


def new_record(job_id: uuid.UUID, spec: JobSpec, now: datetime) -> JobRecord:
    """The row a create statement writes for ``spec`` at ``now`` (``create`` and ``create_many``
    in create.sql, with :func:`row_params`' defaults), as a record. A create reads nothing back:
    the row holds exactly these values, and decoding every column of it again cost more than
    building them (docs/benchmarks.md). Its ``payload`` is the spec's own object, times in UTC."""
    now = now.astimezone(UTC)
    return JobRecord(
        id=job_id,
        type=spec.type,
        payload={} if spec.payload is None else spec.payload,
        status=Status.QUEUED.value,
        priority=spec.priority,
        available_at=now if spec.available_at is None else spec.available_at.astimezone(UTC),
        attempts=0,
        max_attempts=spec.max_attempts,
        idempotency_key=spec.idempotency_key,
        locked_by=None,
        locked_until=None,
        last_error="",
        result=None,
        created_at=now,
        updated_at=now,
        finished_at=None,
        queue=spec.queue or DEFAULT_QUEUE,
        workflow=spec.workflow,
        traceparent=spec.traceparent,
    )
