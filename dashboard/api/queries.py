"""What clients may send in query strings: the job list's filters and the event feeds'.

Query strings arrive as text and are parsed; an unknown parameter is refused, so a misspelt
filter cannot silently widen a list. The OpenAPI document is generated from these models.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from flask import current_app, has_app_context
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from ..config import API_OFFSET_MAX, settings_of
from ..config.rules import (
    BIGINT_MAX,
    EVENT_PAGE_MAX,
    EVENT_PAGE_SIZE,
    JOB_PAGE_MAX,
    JOB_PAGE_SIZE,
    Q_MAX_LENGTH,
    TYPE_MAX_LENGTH,
)
from ..store.reads import search
from ..store.states import EventType, Status
from .cursor import PATTERN as CURSOR_PATTERN
from .cursor import Cursor, decode
from .fields import QueueName, Text

TypeFilter = Annotated[str, Text(max_length=TYPE_MAX_LENGTH)]


def _searchable(value: str) -> str:
    """Refuse a payload search for a value no job's payload can hold (NaN, Infinity, 1e999, an
    unpaired surrogate): 400 naming ``q``, saying why. Any other text is a search."""
    try:
        search.parse_api_q(value)
    except search.UnstorableSearch as exc:
        raise PydanticCustomError("unsearchable", str(exc)) from None
    return value


SearchText = Annotated[str, Text(max_length=Q_MAX_LENGTH), AfterValidator(_searchable)]
"""``q``: any text of up to ``Q_MAX_LENGTH`` characters but a payload search no payload can match."""


def offset_max() -> int:
    """``API_OFFSET_MAX`` of the app serving this request (its default outside one)."""
    return settings_of(current_app).api_offset_max if has_app_context() else API_OFFSET_MAX


def _offset_maximum(schema: dict[str, Any]) -> None:
    schema["maximum"] = offset_max()


class JobListQuery(BaseModel):
    """Query of `GET /api/jobs/`. Empty parameters count as absent."""

    model_config = ConfigDict(title="JobListQuery", use_enum_values=True)

    limit: int = Field(
        default=JOB_PAGE_SIZE,
        ge=1,
        description=f"Page size; a larger value is reduced to {JOB_PAGE_MAX}.",
    )
    offset: int = Field(
        default=0,
        ge=0,
        description=(
            "Jobs to skip, at most API_OFFSET_MAX (default 10,000; the schema's maximum is the server's "
            "setting): an offset reads every job it skips. Deeper: narrow the filter (status, type, q)."
        ),
        json_schema_extra=_offset_maximum,
    )
    status: Status | None = Field(default=None, description="Exact status.")
    type: TypeFilter | None = Field(default=None, description="Case-insensitive substring of the job type.")
    queue: QueueName | None = Field(default=None, description="Exact queue name.")
    q: SearchText | None = Field(
        default=None,
        description=(
            "Search: a full id or an id prefix of 4+ hex digits, an "
            "idempotency key, words or fragments of any job's last_error (a host name, a dotted name or a "
            "path matches by its parts in order, the last a prefix), or a payload match (key=value, a.b=1, "
            "or a JSON object the payload contains; reads the newest 10,000 jobs of the filter). Text "
            "that is not a valid payload search is searched as text; blank text is no search. A payload "
            "search for a value no payload can hold (NaN, Infinity, a number out of range like 1e999, an "
            "unpaired surrogate) is refused with 400."
        ),
    )
    cancelled: bool | None = Field(
        default=None,
        description=(
            "True lists only the jobs an operator cancelled (stored as failed, "
            '`last_error` "Cancelled by ..."), false leaves them out; absent, either.'
        ),
    )

    @field_validator("offset")
    @classmethod
    def _within_the_cap(cls, value: int) -> int:
        cap = offset_max()
        if value > cap:
            raise PydanticCustomError(
                "offset_cap",
                "offset is at most {cap} (API_OFFSET_MAX): an offset reads every job it skips. Narrow "
                "the filter (status, type, or a search q) so that the jobs you want are among the first "
                "{cap}, or raise API_OFFSET_MAX.",
                {"cap": cap},
            )
        return value

    @property
    def page_size(self) -> int:
        return min(self.limit, JOB_PAGE_MAX)


def _cursor(value: object) -> Cursor:
    if isinstance(value, Cursor):
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("cursor", "Invalid cursor.")
    try:
        return decode(value)
    except ValueError:
        raise PydanticCustomError("cursor", "Invalid cursor.") from None


CursorParam = Annotated[
    Cursor,
    PlainValidator(_cursor),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": CURSOR_PATTERN,
            "description": "Opaque; copy it from `next` or `previous`.",
        }
    ),
]


def _comma_separated(value: object) -> object:
    """``exclude=progress,lease_renewed`` (and repeated ``exclude``): one list of names."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        return [name.strip() for item in value for name in str(item).split(",") if name.strip()]
    return value


EventTypeList = Annotated[list[EventType], BeforeValidator(_comma_separated)]


class EventFeedQuery(BaseModel):
    """Query of `GET /api/job-events/`. Empty parameters count as absent."""

    model_config = ConfigDict(title="EventFeedQuery", use_enum_values=True)

    limit: int = Field(
        default=EVENT_PAGE_SIZE,
        ge=1,
        description=f"Page size; a larger value is reduced to {EVENT_PAGE_MAX}.",
    )
    cursor: CursorParam | None = Field(default=None, description="Position from a `next`/`previous` link.")
    type: list[EventType] = Field(
        default_factory=list,
        description=(
            "Exact event type. Repeat it for several (`?type=claimed&type=failed`): events of any of them."
        ),
    )
    exclude: EventTypeList = Field(
        default_factory=list,
        description=(
            "Event types to leave out, comma-separated (`?exclude=progress,lease_renewed`, the "
            "feed without a running job's chatter) or repeated."
        ),
        json_schema_extra={"x-explode": False},
    )
    job_id: uuid.UUID | None = Field(default=None, description="Only this job's events.")

    @property
    def page_size(self) -> int:
        return min(self.limit, EVENT_PAGE_MAX)


class JobEventsQuery(BaseModel):
    """Query of `GET /api/jobs/{id}/events/`. Without parameters: every event, as before."""

    model_config = ConfigDict(title="JobEventsQuery")

    after_id: int | None = Field(default=None, ge=0, le=BIGINT_MAX, description="Only later events.")
    limit: int | None = Field(default=None, ge=1, le=BIGINT_MAX, description="At most this many events.")
