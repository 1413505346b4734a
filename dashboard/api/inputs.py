"""What clients may send in a body: the create and bulk create bodies (query strings:
``queries.py``).

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
    ConfigDict,
    Field,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from ..config import settings_of
from ..config.rules import (
    DEFAULT_PRIORITY,
    IDEMPOTENCY_KEY_MAX_LENGTH,
    INT_MAX,
    PARENTS_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TYPE_MAX_LENGTH,
    UNIQUE_KEY_MAX_LENGTH,
    WINDOW_MAX_SECONDS,
    WORKFLOW_MAX_LENGTH,
)
from ..runtime.handlers import registered_types
from .fields import AwareDatetime, Integer, JsonObject, QueueName, TypeName

# One request, one INSERT statement: big enough to enqueue at bulk speed, small enough that a
# request's validation and its statement stay well under a second and its body usually fits
# the default MAX_CONTENT_LENGTH (1 MiB).
BULK_MAX_JOBS = 1000

JobType = Annotated[str, TypeName(min_length=1, max_length=TYPE_MAX_LENGTH)]
IdempotencyKey = Annotated[str, TypeName(min_length=1, max_length=IDEMPOTENCY_KEY_MAX_LENGTH)]
WorkflowId = Annotated[str, TypeName(min_length=1, max_length=WORKFLOW_MAX_LENGTH)]
ParentPolicy = Literal["cancel", "run", "wait"]  # config.rules.PARENT_FAILURE_POLICIES


def _distinct(parents: list[Any]) -> list[Any]:
    """Refuse a parent named twice (the store would, after validation)."""
    if len(set(parents)) != len(parents):
        raise PydanticCustomError("depends_on_twice", "Names a job twice.")
    return parents


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
    depends_on: Annotated[list[uuid.UUID], AfterValidator(_distinct)] | None = Field(
        default=None,
        max_length=PARENTS_MAX,
        description=(
            f"Ids of existing jobs (at most {PARENTS_MAX}, each once) this job waits for: it is created "
            "`queued` but not claimed until every one has succeeded (a parent that succeeded already, or "
            "was deleted by retention after succeeding, counts). An unknown id is a 400 naming it. Null, "
            "omitted or []: none."
        ),
    )
    on_parent_failure: ParentPolicy | None = Field(
        default=None,
        description=(
            "Only with `depends_on`. What a parent ending `failed` (cancelled included) does: `cancel` "
            "(the default: this job is cancelled, `last_error` naming the parent, and its own dependents "
            "follow their policies), `run` (released once every parent has ended, either way: a "
            '"finally" step) or `wait` (it keeps waiting; a retry of the parent that then succeeds '
            "releases it)."
        ),
    )
    workflow: WorkflowId | None = Field(
        default=None,
        description=(
            f"An id of 1 to {WORKFLOW_MAX_LENGTH} characters grouping jobs for "
            "GET /api/workflows/{workflow}/ and the workflow actions. Null or omitted: a job with "
            "`depends_on` joins its first parent's workflow (a first parent in none starts one, named "
            "by the parent's id); any other, none."
        ),
    )

    @field_validator("on_parent_failure")
    @classmethod
    def _with_parents(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A failure policy means nothing without parents: refused rather than ignored."""
        if value is not None and "depends_on" in info.data and not info.data["depends_on"]:
            raise PydanticCustomError("policy_without_parents", "Only with depends_on.")
        return value

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


def _parent(value: object) -> uuid.UUID | int:
    """A parent of a bulk create's job: a job id, or the index of a job of the same request
    (an integer, ``5.0`` included, never ``true``); one message for either, not one per kind."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < BULK_MAX_JOBS:
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise PydanticCustomError(
        "parent", "Must be a job id (a UUID) or the index of an earlier job of this request."
    )


BulkParent = Annotated[
    uuid.UUID | int,
    PlainValidator(_parent),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "uuid"},
                {"type": "integer", "minimum": 0, "maximum": BULK_MAX_JOBS - 1},
            ]
        }
    ),
]
BulkParents = Annotated[list[BulkParent], AfterValidator(_distinct)]


class BulkCreateJob(CreateJob):
    """One job of `POST /api/jobs/bulk/`: as for `POST /api/jobs/`, and `depends_on` may name an
    earlier job of the same request by its index."""

    model_config = ConfigDict(extra="forbid", title="BulkCreateJob")

    depends_on: BulkParents | None = Field(  # type: ignore[assignment]
        default=None,
        max_length=PARENTS_MAX,
        description=(
            f"As on POST /api/jobs/ (at most {PARENTS_MAX}, each once), and an integer names an earlier job "
            "of the same request by its index in `jobs` (`[0, 1]`: the first two), so one request "
            "creates a whole graph. A later or its own index is a 400."
        ),
    )


class BulkCreateJobs(BaseModel):
    """Body of `POST /api/jobs/bulk/`."""

    model_config = ConfigDict(extra="forbid", title="BulkCreateJobs")

    jobs: list[BulkCreateJob] = Field(
        min_length=1,
        max_length=BULK_MAX_JOBS,
        description=(
            f"1 to {BULK_MAX_JOBS} job bodies, each as for POST /api/jobs/. All are validated before "
            "any is written; errors name the job by its index (`jobs.3.priority`)."
        ),
    )

    def index_errors(self) -> dict[str, list[str]]:
        """A ``depends_on`` index that is not an earlier job's, by the field it is in
        (``jobs.3.depends_on``): the model validates each job alone, this the request."""
        errors: dict[str, list[str]] = {}
        for n, job in enumerate(self.jobs):
            late = [p for p in job.depends_on or () if isinstance(p, int) and p >= n]
            if late:
                errors[f"jobs.{n}.depends_on"] = [f"{late[0]} is not the index of an earlier job."]
        return errors
