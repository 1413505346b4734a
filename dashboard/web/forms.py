"""Flask-WTF forms: the retry button (CSRF only), the create-job form, sign-in and sign-out.

The create form's field names are the JSON API's create body (``type``, ``payload``,
``priority``, ``available_at``, ``max_attempts``, ``idempotency_key``, ``queue``, ``depends_on``,
``on_parent_failure``, ``workflow``) plus ``delay``, a convenience the API spells as
``available_at``. ``depends_on`` is text: job ids, one per line or separated by commas.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from flask_wtf import FlaskForm
from wtforms import (
    FloatField,
    HiddenField,
    IntegerField,
    PasswordField,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.fields.choices import SelectChoice  # type: ignore[attr-defined]  # (wtforms 3.3; the stubs predate it)
from wtforms.validators import InputRequired, Length, NumberRange, Optional, ValidationError

from ..config.rules import (
    DEFAULT_PRIORITY,
    IDEMPOTENCY_KEY_MAX_LENGTH,
    INT_MAX,
    MAX_JSON_DEPTH,
    PARENT_FAILURE_POLICIES,
    PARENTS_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TYPE_MAX_LENGTH,
    UNIQUE_KEY_MAX_LENGTH,
    WINDOW_MAX_SECONDS,
    NonFiniteNumber,
    finite_float,
    json_problem,
    key_problem,
    queue_problem,
    reject_constant,
    text_kind,
    type_problem,
    year_problem,
)
from ..store.lifecycle.create import JobSpec
from ..store.lifecycle.dependents import workflow_problem
from ..tracing import traceparent

DELAY_MAX_SECONDS = 10 * 365 * 86400
ID_SEPARATORS = re.compile(r"[\s,]+")
# The fields a store refusal may name (its ValueError starts with the name): shown there.
STORE_FIELDS = ("depends_on", "on_parent_failure", "workflow", "queue")


def parse_parents(text: str) -> tuple[uuid.UUID, ...]:
    """Job ids, one per line or separated by commas (spaces allowed), in their order; a
    ``ValueError`` naming the first that is not an id, a repeated one, or too many."""
    found: list[uuid.UUID] = []
    for word in ID_SEPARATORS.split(text.strip()):
        if not word:
            continue
        try:
            job_id = uuid.UUID(word)
        except ValueError:
            shown = word if len(word) <= 40 and word.isprintable() else "an entry"
            raise ValueError(f"“{shown}” is not a job id (like 3f2c…, 36 characters).") from None
        if job_id in found:
            raise ValueError(f"{job_id} is named twice.")
        found.append(job_id)
    if len(found) > PARENTS_MAX:
        raise ValueError(f"At most {PARENTS_MAX} parents ({len(found)} given).")
    return tuple(found)


class RetryForm(FlaskForm):
    """A button: its only fields are the CSRF token and where to go back to."""

    next = HiddenField()


PAYLOAD_PROBLEMS = {
    "depth": f"The payload is nested deeper than {MAX_JSON_DEPTH} levels.",
    "nul": "The payload cannot contain the NUL character (\\u0000).",
    "surrogate": "The payload cannot contain a lone surrogate (\\ud800 to \\udfff) outside a pair.",
    "number": "The payload's numbers must be finite.",
}


def parse_payload(text: str) -> dict[str, Any]:
    """The payload as a JSON object, or ``ValueError`` with a message an operator can act on.

    PostgreSQL's ``jsonb`` refuses NaN, infinities, the NUL character and lone surrogates, so
    they are refused here rather than failing in the database; nesting is limited like the
    API's, and nesting too deep for the parser itself is reported the same way.
    """
    try:
        value = json.loads(text, parse_float=finite_float, parse_constant=reject_constant)
    except NonFiniteNumber as exc:
        raise ValueError(f"Not valid JSON: number out of range: {exc.text}.") from None
    except RecursionError:
        raise ValueError(f"The payload is nested deeper than {MAX_JSON_DEPTH} levels.") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).") from None
    except ValueError as exc:
        raise ValueError(f"Not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise ValueError('The payload must be a JSON object, like {} or {"sleep_seconds": 1}.')
    problem = json_problem(value)
    if problem:
        raise ValueError(PAYLOAD_PROBLEMS[problem.kind])
    return value


def parse_available_at(text: str, tz: tzinfo) -> datetime:
    """An ISO 8601 time; without an offset it is read in the dashboard's ``TIME_ZONE``. In the
    years ``FIRST_YEAR`` to ``LAST_YEAR``, as the API's ``available_at`` (config/rules.py)."""
    text = text.strip()
    if not text.isprintable():  # fromisoformat stops at a NUL and ignores what follows
        raise ValueError("Use a date and time like 2026-06-01T12:30 (optionally with an offset).")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("Use a date and time like 2026-06-01T12:30 (optionally with an offset).") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    if problem := year_problem(moment):
        raise ValueError(f"The time {problem}, like 2026-06-01T12:30.")
    try:
        moment.astimezone(tz)
    except (OverflowError, ValueError):
        raise ValueError("That time is out of range.") from None
    return moment


class CreateJobForm(FlaskForm):
    """The create form. ``type`` is free text (the registered types are offered as suggestions);
    the view sets :attr:`known_types` and :attr:`types_strict` before validation, and only
    under ``JOB_TYPES_STRICT`` must the type be one of them."""

    type = StringField(
        "Type",
        validators=[InputRequired(message="Enter a job type."), Length(max=TYPE_MAX_LENGTH)],
    )
    payload = TextAreaField("Payload (JSON object)", default="{}")
    priority = IntegerField(
        "Priority",
        default=DEFAULT_PRIORITY,
        validators=[InputRequired(), NumberRange(PRIORITY_MIN, PRIORITY_MAX)],
    )
    delay = FloatField("Delay (seconds)", validators=[Optional(), NumberRange(0, DELAY_MAX_SECONDS)])
    available_at = StringField("Or available at", validators=[Optional()])
    max_attempts = IntegerField("Max attempts", validators=[InputRequired(), NumberRange(1, INT_MAX)])
    idempotency_key = StringField(
        "Idempotency key",
        filters=[lambda v: v.strip() if isinstance(v, str) else v],
        validators=[Optional(), Length(max=IDEMPOTENCY_KEY_MAX_LENGTH)],
    )
    queue = StringField(
        "Queue",
        filters=[lambda v: v.strip() if isinstance(v, str) else v],
        validators=[Optional()],
        description="Blank: the type's default queue, else default.",
    )
    depends_on = TextAreaField("Depends on (job ids)", validators=[Optional()])
    on_parent_failure = SelectField(
        "When a parent fails",
        choices=[SelectChoice("", "cancel this job (default)")]
        + [SelectChoice(policy, policy) for policy in PARENT_FAILURE_POLICIES if policy != "cancel"],
        validate_choice=False,  # checked below, with a message of its own
    )
    workflow = StringField(
        "Workflow",
        filters=[lambda v: v.strip() if isinstance(v, str) else v],
        validators=[Optional()],
    )

    unique_key = StringField(
        "Unique key",
        filters=[lambda v: v.strip() if isinstance(v, str) else v],
        validators=[Optional(), Length(max=UNIQUE_KEY_MAX_LENGTH)],
    )
    unique_for = FloatField(
        "Unique for (seconds)", validators=[Optional(), NumberRange(0, WINDOW_MAX_SECONDS)]
    )
    unique_while = SelectField(
        "Unique while",
        choices=[SelectChoice("active", "queued or running"), SelectChoice("queued", "queued")],
        default="active",
    )
    debounce = FloatField("Debounce (seconds)", validators=[Optional(), NumberRange(0, WINDOW_MAX_SECONDS)])

    # Set by the view before validation: the time zone naive times are read in, the types
    # registered in this process, and whether only those are accepted.
    time_zone: tzinfo | None = None
    known_types: tuple[str, ...] = ()
    types_strict: bool = False
    parsed_payload: dict[str, Any] | None = None
    parsed_available_at: datetime | None = None
    parsed_parents: tuple[uuid.UUID, ...] = ()

    def validate_type(self, field: StringField) -> None:
        if not isinstance(field.data, str):
            raise ValidationError("The type must be typed into the form as text.")
        kind = text_kind(field.data)
        if kind == "nul":
            raise ValidationError("The type cannot contain the NUL character.")
        if kind == "surrogate":
            raise ValidationError("The type cannot contain a lone surrogate.")
        if problem := type_problem(field.data):
            raise ValidationError(f"The type {problem}.")
        if self.types_strict and field.data not in self.known_types:
            known = ", ".join(self.known_types) or "(none)"
            raise ValidationError(f"Unknown job type (JOB_TYPES_STRICT is on). Registered types: {known}.")

    def validate_payload(self, field: TextAreaField) -> None:
        if not isinstance(field.data, str):  # a file part, or a value from a JSON body
            raise ValidationError("The payload must be typed into the form as text.")
        try:
            self.parsed_payload = parse_payload(field.data)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def validate_delay(self, field: FloatField) -> None:
        if field.data is not None and not math.isfinite(field.data):
            raise ValidationError("The delay must be a number of seconds.")

    def validate_available_at(self, field: StringField) -> None:
        if not field.data:
            return
        if self.delay.data is not None:
            raise ValidationError("Give a delay or an available time, not both.")
        try:
            self.parsed_available_at = parse_available_at(field.data, self.time_zone or UTC)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def validate_queue(self, field: StringField) -> None:
        if not field.data:
            return
        if problem := queue_problem(field.data):
            raise ValidationError(f"The queue name {problem}.")

    def validate_depends_on(self, field: TextAreaField) -> None:
        if not field.data:
            return
        if not isinstance(field.data, str):
            raise ValidationError("The parents must be typed into the form as text.")
        try:
            self.parsed_parents = parse_parents(field.data)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def validate_on_parent_failure(self, field: SelectField) -> None:
        if not field.data:
            return
        if field.data not in PARENT_FAILURE_POLICIES:
            raise ValidationError(f"Choose one of {', '.join(PARENT_FAILURE_POLICIES)}.")
        if not (self.depends_on.data or "").strip():
            raise ValidationError("Only a job with parents (depends on) has a parent to fail.")

    def validate_workflow(self, field: StringField) -> None:
        if not field.data:
            return
        if text_kind(field.data) == "surrogate":
            raise ValidationError("The workflow cannot contain a lone surrogate.")
        if problem := workflow_problem(field.data):
            raise ValidationError(f"The workflow id {problem}.")

    def store_refused(self, exc: ValueError) -> None:
        """Show the store's refusal at the field it names (an unknown parent at ``depends_on``),
        else above the form."""
        message = str(exc)
        for name in STORE_FIELDS:
            if message.startswith(name):
                words = message.removeprefix(name).lstrip(": ")
                self[name].errors = [*self[name].errors, words[:1].upper() + words[1:] + "."]
                return
        self.form_errors.append(message)

    def validate_idempotency_key(self, field: StringField) -> None:
        if not field.data:
            return
        if text_kind(field.data) == "surrogate":
            raise ValidationError("The idempotency key cannot contain a lone surrogate.")
        if problem := key_problem(field.data):  # NUL, other control characters, bidi marks
            raise ValidationError(f"The idempotency key {problem}.")

    def validate_unique_key(self, field: StringField) -> None:
        if field.data and (text_kind(field.data) == "surrogate" or key_problem(field.data)):
            raise ValidationError(
                f"The unique key {key_problem(field.data) or 'cannot contain a lone surrogate'}."
            )

    def validate_unique_for(self, field: FloatField) -> None:
        if field.data is not None and (not math.isfinite(field.data) or field.data <= 0):
            raise ValidationError("The window must be a number of seconds above 0.")
        if field.data is not None and not self.unique_key.data:
            raise ValidationError("Give a unique key for the window to apply to.")

    def validate_debounce(self, field: FloatField) -> None:
        if field.data is None:
            return
        if not math.isfinite(field.data):
            raise ValidationError("The debounce must be a number of seconds.")
        if not self.unique_key.data:
            raise ValidationError("Debounce needs a unique key.")
        if self.delay.data is not None or self.available_at.data:
            raise ValidationError("Debounce sets the start: leave the delay and the time empty.")

    def available_at_for(self, now: datetime) -> datetime | None:
        """When the job becomes claimable: ``available_at``, ``now + delay`` or now (None)."""
        if self.parsed_available_at is not None:
            return self.parsed_available_at
        if self.delay.data:
            return now + timedelta(seconds=self.delay.data)
        return None

    def job_spec(self, now: datetime, type_queue: Callable[[str], str | None]) -> JobSpec:
        """The validated form as the store's spec of the job. ``type_queue``: the queue of a
        type's ``@handler``, for a blank ``queue``."""
        job_type, priority, max_attempts = self.type.data, self.priority.data, self.max_attempts.data
        assert job_type is not None and priority is not None and max_attempts is not None  # InputRequired
        return JobSpec(
            type=job_type,
            payload=self.parsed_payload,
            priority=priority,
            available_at=self.available_at_for(now),
            max_attempts=max_attempts,
            idempotency_key=self.idempotency_key.data or None,
            queue=self.queue.data or type_queue(job_type),
            unique_key=self.unique_key.data or None,
            unique_for=self.unique_for.data if self.unique_key.data else None,
            unique_while=(
                None if not self.unique_key.data or self.debounce.data is not None else self.unique_while.data
            ),
            debounce=self.debounce.data,
            traceparent=traceparent(),
            depends_on=self.parsed_parents,
            on_parent_failure=self.on_parent_failure.data or None,
            workflow=self.workflow.data or None,
        )


class SignInForm(FlaskForm):
    """User name and password; ``next`` is where to go afterwards (checked by ``safe_next``)."""

    username = StringField("User name", validators=[InputRequired(), Length(max=64)])
    password = PasswordField("Password", validators=[InputRequired(), Length(max=1024)])
    next = HiddenField()


class SignOutForm(FlaskForm):
    """A button: only the CSRF token, so a cross-site page cannot sign anyone out."""
