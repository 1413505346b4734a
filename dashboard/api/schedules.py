"""The API's schedules: ``GET /api/schedules/`` and ``/api/schedules/{name}/``, and the
operator's ``pause``, ``resume`` and ``run`` (POST, operator token).

Schedules are declared in code; the API reads their rows and changes only their runtime state
through ``store/flow/schedules.py`` (pause, resume), or enqueues a run now, an ordinary job keyed
under the schedule's prefix, outside its slots. An unknown name is a 404; a retired schedule
cannot be run (409).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from flask import Response
from pydantic import BaseModel, ConfigDict, Field

from ..store.flow import schedules
from ..store.reads import schedules as read_schedules
from ..store.reads.schedules import ScheduleRow
from .access import audit_data
from .blueprint import routes
from .errors import ApiError
from .jobs import json_response
from .outputs import Error, Job, Timestamp
from .registry import Reply


class JobTemplate(BaseModel):
    """The job each run enqueues, with the unique options it carries (null when none)."""

    type: str
    payload: Any
    queue: str
    priority: int
    max_attempts: int
    unique_key: str | None = Field(
        default=None,
        description="The unique key each run holds: while a run holding it is live, a due slot "
        "enqueues nothing (null: none).",
    )
    unique_for: float | None = Field(
        default=None, description="The key's window in seconds from a run's creation (null: no limit)."
    )
    unique_while: Literal["queued", "active"] | None = Field(
        default=None,
        description="`queued` or `active` (queued or running): the states a run holds the key in "
        "(null: no key).",
    )


class Schedule(BaseModel):
    """A schedule: its definition as the workers declared it, and its runtime state."""

    model_config = ConfigDict(extra="forbid")

    name: str
    cron: str = Field(description="Five cron fields: minute hour day month weekday.")
    description: str = Field(description="The expression in words, with its time zone.")
    timezone: str = Field(description="The IANA zone the expression is read in.")
    job: JobTemplate
    missed: Literal["latest", "all"] = Field(description="What a worker enqueues for slots that passed.")
    state: Literal["active", "paused", "retired"]
    paused: bool
    paused_by: str | None = Field(description="Who last paused or resumed it.")
    paused_at: Timestamp | None
    retired_at: Timestamp | None = Field(description="When the code stopped declaring it (runs stay).")
    next_run_at: Timestamp | None = Field(description="The next slot (null: retired, or no more slots).")
    next_runs: list[Timestamp] = Field(description="The next five slots (empty when retired).")
    last_run_at: Timestamp | None = Field(description="The newest slot enqueued.")
    last_fired_at: Timestamp | None = Field(
        description="When a worker last enqueued a slot (database clock)."
    )
    last_job_id: uuid.UUID | None = Field(description="The job of the newest slot enqueued.")
    last_job_status: str | None = Field(description="That job's status (null: none, or deleted).")
    fired_count: int = Field(description="Slots enqueued.")
    skipped_count: int = Field(description="Missed slots left out by the missed-run policy.")
    key_prefix: str = Field(description="Every run's idempotency key starts so: `q` for its jobs.")


class ScheduleList(BaseModel):
    results: list[Schedule]


def schedule_json(row: ScheduleRow) -> Schedule:
    return Schedule(
        name=row.name,
        cron=row.cron,
        description=row.words,
        timezone=row.timezone,
        job=JobTemplate(
            type=row.job_type,
            payload=row.payload,
            queue=row.queue,
            priority=row.priority,
            max_attempts=row.max_attempts,
            unique_key=row.unique_key,
            unique_for=row.unique_for,
            unique_while=row.unique_while,  # type: ignore[arg-type]
        ),
        missed=row.missed,  # type: ignore[arg-type]
        state=row.state,  # type: ignore[arg-type]
        paused=row.paused,
        paused_by=row.paused_by,
        paused_at=row.paused_at,
        retired_at=row.retired_at,
        next_run_at=None if row.retired else row.next_run_at,
        next_runs=row.upcoming,
        last_run_at=row.last_run_at,
        last_fired_at=row.last_fired_at,
        last_job_id=row.last_job_id,
        last_job_status=row.last_job_status,
        fired_count=row.fired_count,
        skipped_count=row.skipped_count,
        key_prefix=row.key_prefix,
    )


def schedule_or_404(name: str) -> ScheduleRow:
    row = read_schedules.get_schedule(name)
    if row is None:
        raise ApiError(404, "Not found.")
    return row


@routes.route(
    "/schedules/",
    "GET",
    summary="Schedules",
    replies={200: Reply("Every schedule, active ones first, by name.", ScheduleList)},
    tag="schedules",
)
def schedule_list() -> Response:
    """Every schedule the workers declared (retired ones last), each with its next five slots."""
    rows = read_schedules.list_schedules()
    return json_response(ScheduleList(results=[schedule_json(row) for row in rows]))


@routes.route(
    "/schedules/<name>/",
    "GET",
    summary="One schedule",
    replies={200: Reply("The schedule.", Schedule)},
    tag="schedules",
)
def schedule_detail(name: str) -> Response:
    """One schedule by name."""
    return json_response(schedule_json(schedule_or_404(name)))


def _set_paused(name: str, paused: bool) -> Response:
    data = audit_data()
    actor = str(data.get("actor") or "")
    if not schedules.set_paused(name, paused, actor=actor, event_data=data):
        raise ApiError(404, "Not found.")
    return json_response(schedule_json(schedule_or_404(name)))


@routes.route(
    "/schedules/<name>/pause/",
    "POST",
    summary="Pause a schedule",
    replies={200: Reply("Paused: no slot is enqueued until it is resumed.", Schedule)},
    tag="schedules",
)
def schedule_pause(name: str) -> Response:
    """No worker enqueues its slots until it is resumed; pausing twice is a no-op (who and when
    are recorded). Its runs already enqueued are not touched. No body is needed."""
    return _set_paused(name, True)


@routes.route(
    "/schedules/<name>/resume/",
    "POST",
    summary="Resume a schedule",
    replies={200: Reply("Resumed: from its next slot after now.", Schedule)},
    tag="schedules",
)
def schedule_resume(name: str) -> Response:
    """Its next run is its first slot after now: the slots that passed while it was paused are
    not enqueued. No body is needed."""
    return _set_paused(name, False)


@routes.route(
    "/schedules/<name>/run/",
    "POST",
    summary="Run a schedule now",
    replies={
        201: Reply("Enqueued: one run now, outside the slots.", Job),
        409: Reply("The schedule is retired.", Error),
    },
    tag="schedules",
)
def schedule_run(name: str) -> Response:
    """Enqueue one run now: a job of the schedule's template keyed
    `schedule:{name}:{now}:now:{random}` (found by its prefix, linked to its schedule),
    outside its slots, which do not move. A paused schedule runs too. No body is needed."""
    try:
        job = schedules.run_now(name, event_data=audit_data())
    except schedules.ScheduleRetired:
        raise ApiError(409, f"The schedule {name!r} is retired: the code no longer declares it.") from None
    if job is None:
        raise ApiError(404, "Not found.")
    return json_response(Job.model_validate(job), status=201)
