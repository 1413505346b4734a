"""What the API answers: the JSON shapes docs/http-api.md describes and the
``/api/schema/`` document, field for field.

Responses are serialised through these models, and the OpenAPI document is generated from
them, so a shape cannot change without the published schema changing with it. One exception,
for speed: the answers of the two create endpoints are rendered by :func:`job_json` and
:func:`bulk_results_json`, which tests hold to the bytes ``Job`` and ``BulkResults`` render.
Timestamps are rendered as ISO 8601 with the offset of ``TIME_ZONE`` (passed as
serialisation context).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Annotated, Any, Literal

import pydantic_core
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    RootModel,
    SerializationInfo,
    WithJsonSchema,
)

from ..store.states import EventType, Status


def _iso(value: datetime, info: SerializationInfo) -> str:
    tz: tzinfo = (info.context or {}).get("tz", UTC)
    return value.astimezone(tz).isoformat()


Timestamp = Annotated[
    datetime,
    PlainSerializer(_iso, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


Parents = Annotated[list[uuid.UUID], BeforeValidator(lambda value: value or [])]
"""A job's ``depends_on``: the store's ``None`` (no parents) is ``[]``."""


class Output(BaseModel):
    """Built from the store's records (attributes), never from client input."""

    model_config = ConfigDict(from_attributes=True, extra="forbid")


class Job(Output):
    """A job, as the job list items and the job detail show it."""

    id: uuid.UUID
    type: str
    payload: Any = Field(description="Handler input.")
    status: Status
    priority: int
    available_at: Timestamp
    attempts: int
    max_attempts: int
    idempotency_key: str | None
    locked_by: str | None = Field(description="Worker id holding the current attempt.")
    locked_until: Timestamp | None = Field(description="Lease expiry of the current attempt.")
    last_error: str
    result: Any = Field(description="Handler result, once succeeded.")
    created_at: Timestamp
    updated_at: Timestamp
    finished_at: Timestamp | None
    queue: str = Field(description="The job's named queue (`default` unless one was named).")
    depends_on: Parents = Field(description="Ids of the jobs it waits for or waited for ([]: none).")
    on_parent_failure: Literal["cancel", "run", "wait"] | None = Field(
        description="What a parent's failure does to it (null: it has no parents)."
    )
    workflow: str | None = Field(description="The workflow it belongs to (null: none).")
    waiting_on: int = Field(
        description=(
            "How many parents have not yet succeeded (under `run`: not yet ended); 0 once released. "
            "A waiting job is `queued` with `available_at` at the end of year 9999 until then."
        )
    )
    unique_key: str | None = Field(default=None, description="Its unique key (null: none).")
    unique_for: float | None = Field(
        default=None, description="Its key's window in seconds (null: no limit)."
    )
    unique_while: str | None = Field(
        default=None, description="`queued` or `active`: the states it holds its key in."
    )
    snoozes: int = Field(
        0,
        description="Attempts that snoozed (`raise Snooze(seconds)`). Each also added one to "
        "`max_attempts`: the budget set at create is `max_attempts - snoozes`.",
    )
    traceparent: str | None = Field(None, description="The W3C trace context of its create (tracing).")


class BulkResult(BaseModel):
    """One job of a bulk create, at the index of its body in the request."""

    created: bool = Field(description="False: its idempotency_key was taken; `job` is the existing job.")
    job: Job


class BulkResults(BaseModel):
    """The jobs of a bulk create, in the order of the request's `jobs`."""

    results: list[BulkResult]


def bulk_results_json(results: Sequence[Any], tz: tzinfo, rendered: Sequence[bytes] | None = None) -> bytes:
    """``BulkResults`` of the store's ``CreateResult`` list as ``json_response`` renders it, byte
    for byte, without building a ``Job`` model per job first.

    At 1,000 jobs per request, validating 1,000 ``Job`` models from the records and rendering
    each timestamp through ``_iso`` cost more than the request's INSERT (docs/benchmarks.md).
    The records come from the store, so there is nothing to validate; each distinct
    timestamp (a batch shares its ``created_at``) is rendered once. ``rendered``: each job of
    the request already rendered by :func:`job_renderer` as it was to be created (while the
    server inserted it); a created job's answer is that, a deduplicated one's is rendered here.
    tests/api/test_bulk.py checks this against the model path.
    """
    render = job_renderer(tz)
    parts = [
        (b'{"created":true,"job":' if result.created else b'{"created":false,"job":')
        + (rendered[n] if rendered is not None and result.created else render(result.job))
        + b"}"
        for n, result in enumerate(results)
    ]
    return b'{"results":[' + b",".join(parts) + b"]}"


def job_json(job: Any, tz: tzinfo) -> bytes:
    """One engine ``JobRecord`` as ``json_response(Job.model_validate(job))`` renders it, byte for
    byte (tests/api/test_create.py checks it): the answer of ``POST /api/jobs/``, the API's
    busiest write, without a model to validate and serialise."""
    return job_renderer(tz)(job)


def job_renderer(tz: tzinfo) -> Callable[[Any], bytes]:
    """:func:`job_json` for many records of one answer: each distinct timestamp rendered once."""
    iso = _timestamps(tz)

    def render(job: Any) -> bytes:
        return pydantic_core.to_json(_job_fields(job, iso))

    return render


def _timestamps(tz: tzinfo) -> Callable[[datetime | None], str | None]:
    """``_iso`` for ``tz`` without the serialisation info, each distinct instant rendered once."""
    # Keyed with the offset too: two aware datetimes of one zone that differ only in ``fold``
    # (the repeated hour when clocks go back) compare equal but are different instants.
    rendered: dict[tuple[datetime, object], str] = {}

    def iso(value: datetime | None) -> str | None:
        if value is None:
            return None
        key = (value, value.utcoffset())
        text = rendered.get(key)
        if text is None:
            text = rendered[key] = value.astimezone(tz).isoformat()
        return text

    return iso


def _job_fields(job: Any, iso: Callable[[datetime | None], str | None]) -> dict[str, Any]:
    """A record's fields as ``Job`` serialises them: its fields, in its order."""
    return {
        "id": job.id,
        "type": job.type,
        "payload": job.payload,
        "status": job.status,
        "priority": job.priority,
        "available_at": iso(job.available_at),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "idempotency_key": job.idempotency_key,
        "locked_by": job.locked_by,
        "locked_until": iso(job.locked_until),
        "last_error": job.last_error,
        "result": job.result,
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
        "finished_at": iso(job.finished_at),
        "queue": job.queue,
        "depends_on": job.depends_on or [],
        "on_parent_failure": job.on_parent_failure,
        "workflow": job.workflow,
        "waiting_on": job.waiting_on,
        "unique_key": job.unique_key,
        "unique_for": job.unique_for,
        "unique_while": job.unique_while,
        "snoozes": job.snoozes,
        "traceparent": job.traceparent,
    }


class JobEvent(Output):
    """One entry of a job's append-only timeline."""

    id: int
    job: uuid.UUID = Field(validation_alias=AliasChoices("job", "job_id"), description="The job's id.")
    type: EventType = Field(
        description="The nine types of a job's lifecycle, plus `cancelled` (an operator cancelled the "
        "queued job) and `rescheduled` (an operator made a waiting one due now)."
    )
    attempt: int
    worker_id: str | None
    message: str
    data: Any
    created_at: Timestamp


class JobEventList(RootModel[list[JobEvent]]):
    """A job's events, oldest first."""


class JobPage(BaseModel):
    """Limit-offset page of jobs, newest first."""

    count: int = Field(description="Jobs matching the filters, on all pages.")
    next: str | None = Field(description="Absolute URL of the next page.")
    previous: str | None = Field(description="Absolute URL of the previous page.")
    results: list[Job]


class JobEventPage(BaseModel):
    """Cursor page of the global event feed, newest first."""

    next: str | None = Field(description="Absolute URL of older events.")
    previous: str | None = Field(description="Absolute URL of newer events.")
    results: list[JobEvent]


class ByStatus(BaseModel):
    queued: int
    running: int
    succeeded: int
    failed: int


class Stats(BaseModel):
    """Queue totals, one pass over the jobs table."""

    model_config = ConfigDict(extra="forbid")

    total: int
    by_status: ByStatus
    overdue_running: int = Field(description="Running jobs whose lease has expired.")
    retries_pending: int = Field(description="Queued jobs with attempts > 0.")
    oldest_queued_at: Timestamp | None = Field(description="Earliest created_at among queued jobs.")
    waiting: int = Field(
        description="Of the queued jobs, those waiting for their parents (`depends_on`): never due "
        "until released. They stay counted in `by_status.queued`."
    )


class Health(BaseModel):
    ok: bool
    database: Literal["ok", "error"]
    detail: str | None = Field(default=None, description="Why the database is unreachable (only on 503).")


class Config(BaseModel):
    """The worker settings in force, under their environment names, and the registered job types."""

    model_config = ConfigDict(extra="forbid")

    JOB_WORKER_THREADS: int
    JOB_WORKER_POLL_INTERVAL_MS: float
    JOB_WORKER_LEASE_SECONDS: float
    JOB_WORKER_CLEANUP_INTERVAL_SECONDS: float
    JOB_WORKER_CLEANUP_BATCH_SIZE: int
    JOB_WORKER_BACKOFF_BASE_SECONDS: float
    JOB_WORKER_BACKOFF_MAX_SECONDS: float
    JOB_WORKER_MAX_ATTEMPTS_DEFAULT: int
    JOB_WORKER_LOG_LEVEL: str
    JOB_HANDLER_MODULES: list[str]
    JOB_WORKER_BATCH_SIZE: int = Field(description="Jobs claimed per claim statement (1: one at a time).")
    JOB_WORKER_LISTEN: bool = Field(description="Workers wake on LISTEN/NOTIFY as well as by polling.")
    JOB_WORKER_QUEUES: list[str] | None = Field(
        description="The queues workers claim from by default; null: every queue."
    )
    JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS: float = Field(
        description="After SIGINT/SIGTERM, seconds running jobs get before they are requeued (0: no limit)."
    )
    JOB_WORKER_HEARTBEAT_SECONDS: float = Field(description="How often each worker process reports in.")
    JOB_WORKER_PROGRESS_FLUSH_MS: float = Field(
        description="A handler's pending progress report is written within this long (else with its settle)."
    )
    JOB_WORKER_SCHEDULES: bool = Field(description="Workers fire due schedules (recurring jobs).")
    JOB_WORKER_PROCESSES: int = Field(
        description="Worker processes one `flask worker` starts, each with its threads (1: no supervisor)."
    )
    JOB_MAX_SNOOZES: int = Field(description="Snoozes one job may take; the next fails it.")
    job_types: list[str] = Field(description="Job types registered in the web process (any is accepted).")


class Error(BaseModel):
    """Every error. `errors` (on 400) maps each offending field to its messages."""

    detail: str
    errors: dict[str, list[str]] | None = Field(default=None)


class Conflict(BaseModel):
    """The request does not fit the job's current state."""

    detail: str
    status: Status = Field(description="The job's current status.")


class CappedCount(BaseModel):
    count: int = Field(description="Exact when `exact`; otherwise the cap, and there are more.")
    exact: bool


class TypeDetail(BaseModel):
    type: str
    ready: CappedCount
    running: int
    retrying: CappedCount
    failed_24h: CappedCount = Field(description="Failed jobs that finished in the last 24 hours.")
    oldest_ready_wait_seconds: float | None = Field(description="Now minus the oldest ready available_at.")


class MinuteDetail(BaseModel):
    minute: Timestamp
    succeeded: int
    failed: int
    failure_rate: float | None
    wait_p50_ms: float | None = Field(description="Claim time minus available_at, median.")
    wait_p95_ms: float | None


class RunTimeDetail(BaseModel):
    type: str
    runs: int
    p50_ms: float
    p95_ms: float


class StatsDetail(BaseModel):
    """The overview's figures. Live counts are exact up to a cap, then say so (`exact: false`)."""

    model_config = ConfigDict(extra="forbid")

    ready: CappedCount = Field(description="Queued and due now (first runs and due retries).")
    scheduled: CappedCount = Field(description="Queued for later, never run.")
    retrying: CappedCount = Field(description="Queued for later after a failed attempt (backing off).")
    waiting: CappedCount = Field(description="Queued and waiting for their parents (`depends_on`).")
    running: CappedCount
    overdue_running: int
    oldest_ready_at: Timestamp | None
    oldest_ready_wait_seconds: float | None = Field(description="Now minus the oldest ready available_at.")
    types: list[TypeDetail]
    minutes: list[MinuteDetail] = Field(description="The last hour, minutes with activity only.")
    run_times: list[RunTimeDetail] = Field(description="Attempts that ended in the last hour, per type.")
    sampled: bool = Field(
        description=(
            "True when the last hour held at least `sampled_events` claims and outcomes (other "
            "events are not read): `minutes` and `run_times` then come from the newest "
            "`sampled_events` of them only, and the minutes that read did not reach whole are "
            "missing (never partial). The live counts are not affected."
        )
    )
    sampled_events: int = Field(
        description="How many of the hour's newest claims and outcomes the charts read at most."
    )
