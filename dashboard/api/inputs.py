"""What clients may send: the create body and the list and feed query strings.

These models are the API's only validation layer, and the OpenAPI document is generated from
them, so the published rules and the enforced rules cannot drift apart.

Bodies are strict (``"50"`` is not a priority, ``true`` is not a number, unknown fields are
refused so a misspelt field cannot be silently ignored); query strings arrive as text and are
parsed. ``null`` or an omitted field means the field's default.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from flask import current_app, has_app_context
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from ..config import API_OFFSET_MAX, settings_of
from ..config.rules import (
    BIGINT_MAX,
    DEFAULT_PRIORITY,
    EVENT_PAGE_MAX,
    EVENT_PAGE_SIZE,
    IDEMPOTENCY_KEY_MAX_LENGTH,
    INT_MAX,
    JOB_PAGE_MAX,
    JOB_PAGE_SIZE,
    PRIORITY_MAX,
    PRIORITY_MIN,
    Q_MAX_LENGTH,
    TYPE_MAX_LENGTH,
    UNIQUE_KEY_MAX_LENGTH,
    WINDOW_MAX_SECONDS,
)
from ..runtime.handlers import registered_types
from ..store.reads import search
from ..store.states import EventType, Status
from .cursor import PATTERN as CURSOR_PATTERN
from .cursor import Cursor, decode
from .fields import AwareDatetime, Integer, JsonObject, QueueName, Text, TypeName

# One request, one INSERT statement: big enough to enqueue at bulk speed, small enough that a
# request's validation and its statement stay well under a second and its body usually fits
# the default MAX_CONTENT_LENGTH (1 MiB).
BULK_MAX_JOBS = 1000

JobType = Annotated[str, TypeName(min_length=1, max_length=TYPE_MAX_LENGTH)]
IdempotencyKey = Annotated[str, TypeName(min_length=1, max_length=IDEMPOTENCY_KEY_MAX_LENGTH)]
TypeFilter = Annotated[str, Text(max_length=TYPE_MAX_LENGTH)]
UniqueKey = Annotated[str, TypeName(min_length=1, max_length=UNIQUE_KEY_MAX_LENGTH)]
Window = Annotated[float, Field(strict=True, gt=0, le=WINDOW_MAX_SECONDS, allow_inf_nan=False)]
Debounce = Annotated[float, Field(strict=True, ge=0, le=WINDOW_MAX_SECONDS, allow_inf_nan=False)]


def types_strict() -> bool:
    """``JOB_TYPES_STRICT`` of the app serving this request (``False`` outside one).

    Off (the default), ``type`` is any string of 1 to ``limits.TYPE_MAX_LENGTH`` characters: a
    producer may enqueue a type before the workers that handle it are deployed, and a worker
    without a handler fails the attempt. On, only the types registered in this process pass.
    """
    if not has_app_context():
        return False
    return settings_of(current_app).job_types_strict


TYPES_STRICT = "types_strict"  # key of the validation context (body_context)


def body_context() -> dict[str, Any]:
    """The validation context of a request body: :func:`types_strict`, read once per request
    instead of once per job of a bulk create (1,000 lookups of the app's settings)."""
    return {TYPES_STRICT: types_strict()}


def _registered_types_enum(schema: dict[str, Any]) -> None:
    """Publish the registered types, read when the document is built: as the ``enum`` that is
    enforced under ``JOB_TYPES_STRICT``, otherwise as ``examples`` (any type is accepted)."""
    types = registered_types()
    if types and types_strict():
        schema["enum"] = types
    elif types:
        schema["examples"] = types


class CreateJob(BaseModel):
    """Body of `POST /api/jobs/`."""

    model_config = ConfigDict(extra="forbid", title="CreateJob")

    type: JobType = Field(
        description=(
            f"The job type: a routing key of 1 to {TYPE_MAX_LENGTH} characters. Any type is accepted "
            "unless the server runs with JOB_TYPES_STRICT=true; GET /api/config/ `job_types` lists the types "
            "registered in the web process (a worker without a handler for a type fails its attempts)."
        ),
        json_schema_extra=_registered_types_enum,
    )
    payload: JsonObject | None = Field(
        default=None, description="Handler input, a JSON object. Null or omitted: {}."
    )
    priority: Annotated[int, Integer(ge=PRIORITY_MIN, le=PRIORITY_MAX)] | None = Field(
        default=DEFAULT_PRIORITY, description="Higher is claimed first. Null or omitted: 50."
    )
    available_at: AwareDatetime | None = Field(
        default=None,
        description="Earliest time a worker may claim the job, with an offset. Null or omitted: now.",
    )
    max_attempts: Annotated[int, Integer(ge=1, le=INT_MAX)] | None = Field(
        default=None,
        description="Attempts before the job fails for good. Null or omitted: the worker default.",
    )
    idempotency_key: IdempotencyKey | None = Field(
        default=None,
        description=(
            "A second create with the same key returns the first job (200) instead of a new one. Control and "
            "invisible formatting characters (bidi marks, zero-width spaces) are refused, as in `type`."
        ),
    )
    queue: QueueName | None = Field(
        default=None,
        description=(
            "The named queue, 1 to 64 characters of A-Z a-z 0-9 _ . : -. Null or omitted: the "
            "type's handler default (@handler(queue=...)), else `default`."
        ),
    )

    unique_key: UniqueKey | None = Field(
        default=None,
        description=(
            "While a job with this key is in `unique_while`'s states and younger than `unique_for`, a "
            "create with the key returns that job (200), unchanged, also when creates race (Oban `unique`, "
            "RQ `unique`)."
        ),
    )
    unique_for: Window | None = Field(
        default=None,
        description="Seconds from the holder's created_at. Needs unique_key. Null or omitted: no limit.",
    )
    unique_while: Literal["queued", "active"] | None = Field(
        default=None,
        description="`queued` (while it waits) or `active` (queued or running). Null or omitted: active "
        "(queued with debounce).",
    )
    debounce: Debounce | None = Field(
        default=None,
        description=(
            "Seconds; needs unique_key, not with available_at. A create that finds the queued job with "
            "the key replaces its payload and moves its start to now + debounce (200, event `debounced`); "
            "else the job is created to start then."
        ),
    )

    @field_validator("unique_for", "unique_while", "debounce")
    @classmethod
    def _keyed(cls, value: Any, info: ValidationInfo) -> Any:
        """The unique options need a key; debounce sets the start and matches queued jobs only."""
        if value is not None and "unique_key" in info.data and info.data["unique_key"] is None:
            raise PydanticCustomError("unique_key_missing", "Needs unique_key.")
        if info.field_name == "debounce" and value is not None:
            if info.data.get("available_at") is not None:
                raise PydanticCustomError("debounce_start", "Give debounce or available_at, not both.")
            if info.data.get("unique_while") == "active":
                raise PydanticCustomError(
                    "debounce_states", "Debounce matches a queued job: unique_while active."
                )
        return value

    @field_validator("type")
    @classmethod
    def _registered(cls, value: str, info: ValidationInfo) -> str:
        """Under ``JOB_TYPES_STRICT`` only, refuse types this process has not registered."""
        context = info.context
        strict = context[TYPES_STRICT] if context and TYPES_STRICT in context else types_strict()
        if not strict:
            return value
        types = registered_types()
        if value not in types:
            raise PydanticCustomError(
                "unknown_job_type",
                "Unknown job type. Registered types: {types}.",
                {"types": ", ".join(types) or "(none)"},
            )
        return value


class BulkCreateJobs(BaseModel):
    """Body of `POST /api/jobs/bulk/`."""

    model_config = ConfigDict(extra="forbid", title="BulkCreateJobs")

    jobs: list[CreateJob] = Field(
        min_length=1,
        max_length=BULK_MAX_JOBS,
        description=(
            f"1 to {BULK_MAX_JOBS} job bodies, each as for POST /api/jobs/. All are validated before "
            "any is written; errors name the job by its index (`jobs.3.priority`)."
        ),
    )


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
