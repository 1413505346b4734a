"""`/api/queues/`: named queues, their figures, pause, resume and limits.

Reads need a viewer token, the writes (pause, resume, PATCH) an operator token (``access.py``:
every non-GET method). The writes go through ``store/flow/queues.py``; this door only validates.
A name outside ``limits.QUEUE_NAME_PATTERN`` is a 400 on ``name``; an out-of-range limit a 400
on its field; a GET of a name with neither jobs nor settings a 404. Nothing changes on a
refused request.
"""

from __future__ import annotations

from typing import Annotated, Any

from flask import Response
from pydantic import BaseModel, ConfigDict, Field, Strict

from ..config.rules import CONCURRENCY_LIMIT_MAX, RATE_COUNT_MAX, RATE_PERIOD_MAX_SECONDS, queue_problem
from ..store.flow import queues
from ..store.reads import queues as read_queues
from .access import audit_data
from .blueprint import routes
from .errors import ApiError, validation_error
from .fields import Integer
from .jobs import json_response
from .outputs import Error
from .registry import Reply

route = routes.route
BAD_NAME = Reply("The name is not a valid queue name: `errors.name` says why.", Error)


class RateLimitOut(BaseModel):
    count: int
    period_seconds: float


class Queue(BaseModel):
    """A queue, with its settings and live counts: exact up to a cap, then the cap + 1 (10,000
    for one queue, 1,000 each in the list of every queue)."""

    name: str
    paused: bool
    concurrency_limit: int | None = Field(
        description="At most this many attempts running at once; null: none."
    )
    rate_limit: RateLimitOut | None = Field(
        description="At most `count` claims in any `period_seconds` window."
    )
    ready: int
    scheduled: int
    retrying: int
    running: int
    oldest_ready_wait_seconds: float | None
    waiting: int = Field(
        description="Queued jobs waiting for their parents (`depends_on`): not due until released."
    )


class QueueList(BaseModel):
    results: list[Queue] = Field(
        description=(
            f"The queues by name, at most {read_queues.QUEUES_SHOWN}; past that many, every paused queue is "
            "among them (paused ones are chosen first, then the rest by name)."
        )
    )
    truncated: bool = Field(
        description=f"More queues exist than the {read_queues.QUEUES_SHOWN} listed (see `total`)."
    )
    total: int = Field(description="How many queues have jobs or settings, listed or not.")


class RateLimitIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: Annotated[int, Integer(ge=1, le=RATE_COUNT_MAX)]
    period_seconds: Annotated[float, Strict()] = Field(gt=0, le=RATE_PERIOD_MAX_SECONDS, allow_inf_nan=False)


class QueueLimits(BaseModel):
    """Body of `PATCH /api/queues/{name}/`: a field left out stays as it is; null removes the limit."""

    model_config = ConfigDict(extra="forbid", title="QueueLimits")

    concurrency_limit: Annotated[int, Integer(ge=1, le=CONCURRENCY_LIMIT_MAX)] | None = Field(
        default=None, description=f"1 to {CONCURRENCY_LIMIT_MAX}, or null for no limit."
    )
    rate_limit: RateLimitIn | None = Field(default=None, description="{count, period_seconds}, or null.")


def _name(name: str) -> str:
    if problem := queue_problem(name):
        raise validation_error({"name": [f"A queue name {problem}."]})
    return name


def _answer(name: str) -> Response:
    info = read_queues.get_queue(name)
    if info is None:  # a write always leaves a row; only a GET can get here
        raise ApiError(404, "No such queue: it has neither jobs nor settings.")
    return json_response(Queue.model_validate(info.as_json()))


def _actor(data: dict[str, Any]) -> str:
    return str(data.get("actor") or "")


@route(
    "/queues/",
    "GET",
    summary="List queues",
    tag="queues",
    replies={200: Reply("Every queue that has jobs or settings, by name (at most 500).", QueueList)},
)
def queue_list() -> Response:
    """Every queue that has jobs or settings: name, paused, limits, bounded counts and the
    oldest ready job's wait. At most 500: `truncated` and `total` say when there are more."""
    board = read_queues.queue_board()
    found = [Queue.model_validate(q.as_json()) for q in board.queues]
    return json_response(QueueList(results=found, truncated=board.truncated, total=board.total))


@route(
    "/queues/<name>/",
    "GET",
    summary="One queue",
    tag="queues",
    replies={
        200: Reply("The queue.", Queue),
        400: BAD_NAME,
        404: Reply("No jobs and no settings by that name.", Error),
    },
)
def queue_detail(name: str) -> Response:
    """One queue; 404 for a name that has neither jobs nor settings."""
    return _answer(_name(name))


@route(
    "/queues/<name>/pause/",
    "POST",
    summary="Pause a queue",
    tag="queues",
    replies={200: Reply("Paused (pausing twice is a no-op).", Queue), 400: BAD_NAME},
)
def queue_pause(name: str) -> Response:
    """No new attempt of the queue is claimed by any worker; running attempts go on and settle.
    Any valid name, one with no jobs yet included."""
    data = audit_data()
    queues.pause(_name(name), actor=_actor(data), event_data=data)
    return _answer(name)


@route(
    "/queues/<name>/resume/",
    "POST",
    summary="Resume a queue",
    tag="queues",
    replies={200: Reply("Resumed; idle workers serving it are woken.", Queue), 400: BAD_NAME},
)
def queue_resume(name: str) -> Response:
    """The queue's jobs are claimed again; idle workers serving it wake at once (NOTIFY)."""
    data = audit_data()
    queues.resume(_name(name), actor=_actor(data), event_data=data)
    return _answer(name)


@route(
    "/queues/<name>/",
    "PATCH",
    summary="Set a queue's limits",
    body=QueueLimits,
    tag="queues",
    replies={200: Reply("The limits in force.", Queue)},
)
def queue_limits(name: str, body: QueueLimits) -> Response:
    """Set `concurrency_limit` and/or `rate_limit` (null: no limit; left out: unchanged). Held
    across every worker (docs: "Queues and limits")."""
    name = _name(name)
    given = body.model_fields_set
    changes: dict[str, Any] = {}
    if "concurrency_limit" in given:
        changes["concurrency_limit"] = body.concurrency_limit
    if "rate_limit" in given:
        rate = body.rate_limit
        changes["rate_limit"] = None if rate is None else queues.RateLimit(rate.count, rate.period_seconds)
    data = audit_data()
    queues.set_limits(name, actor=_actor(data), event_data=data, **changes)
    return _answer(name)
