"""Field types shared by the API's input models: text, aware datetimes, JSON documents.

Each one refuses what PostgreSQL cannot store or what the store would misread, so a bad
value is a 400 naming the field rather than a database error (a 500) after the fact:
NUL characters and unpaired surrogates (not storable in text or jsonb), naive datetimes (whose
instant is unknowable), non-finite numbers and absurdly deep documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from annotated_types import Ge, GroupedMetadata, Le
from pydantic import (
    AfterValidator,
    BeforeValidator,
    GetJsonSchemaHandler,
    Strict,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from ..config.rules import (
    FIRST_YEAR,
    LAST_YEAR,
    MAX_JSON_DEPTH,
    QUEUE_NAME_PATTERN,
    TYPE_PATTERN,
    json_problem,
    queue_problem,
    text_kind,
    type_problem,
)

TEXT_PROBLEMS = {
    "nul": "Must not contain NUL characters.",
    "surrogate": "Must be valid Unicode (unpaired surrogate).",
}


def text_problem(value: str) -> str | None:
    """Why PostgreSQL could not store ``value``, or ``None`` if it can."""
    kind = text_kind(value)
    return TEXT_PROBLEMS[kind] if kind else None


def _storable_text(value: str) -> str:
    problem = text_problem(value)
    if problem:
        raise PydanticCustomError("unstorable_text", problem)
    return value


_DATE_TIME = re.compile(
    r"(?P<year>\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?"
    r"(?P<offset>[Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)?"
)
# The published rule, exactly what the validator below accepts (with the calendar's own
# check of the day, which ``format: date-time`` states): an RFC 3339 date-time with an offset,
# in years FIRST_YEAR to LAST_YEAR (config/rules.py: whatever the offset, the instant stays inside what
# Python and every time zone conversion can represent).
DATE_TIME_PATTERN = (
    r"^(19\d\d|[2-8]\d{3}|9[0-8]\d\d|99[0-8]\d)-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    r"[Tt]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$"
)


def _aware_datetime(value: Any) -> Any:
    """An RFC 3339 date-time with an offset, as ``format: date-time`` and DATE_TIME_PATTERN say.

    Stricter than ``datetime.fromisoformat`` on purpose: the document promises RFC 3339, so
    week dates, basic format and a space for ``T`` are refused rather than half-accepted.
    """
    if not isinstance(value, str):
        raise PydanticCustomError("datetime_type", "Must be an ISO 8601 date-time string with an offset.")
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        raise PydanticCustomError(
            "datetime_parsing",
            "Not a valid ISO 8601 (RFC 3339) date-time (e.g. 2026-06-21T02:33:01+03:30).",
        )
    if match.group("offset") is None:
        raise PydanticCustomError(
            "datetime_naive", "Must include a time zone offset (e.g. +00:00 or Z): naive times are ambiguous."
        )
    if not FIRST_YEAR <= int(match.group("year")) <= LAST_YEAR:
        raise PydanticCustomError("datetime_range", f"The year must be between {FIRST_YEAR} and {LAST_YEAR}.")
    try:
        # In UTC: the instant is what counts, and PostgreSQL's own parser refuses offsets past
        # 15:59 that RFC 3339 allows (up to 23:59).
        return datetime.fromisoformat(value.upper()).astimezone(UTC)
    except ValueError:  # a day the month does not have
        raise PydanticCustomError(
            "datetime_parsing", "Not a valid date (e.g. 2026-06-21T02:33:01+03:30)."
        ) from None


def _storable_json(value: Any) -> Any:
    """Refuse what ``jsonb`` cannot store (``limits.json_problem``), naming where it is."""
    problem = json_problem(value)
    if problem is None:
        return value
    if problem.kind == "depth":
        raise PydanticCustomError(
            "json_depth", "Nested deeper than {limit} levels.", {"limit": MAX_JSON_DEPTH}
        )
    if problem.kind == "number":
        raise PydanticCustomError("json_number", "Numbers must be finite.")
    if problem.key is not None:
        raise PydanticCustomError(
            "unstorable_text", "Key '{key}': " + TEXT_PROBLEMS[problem.kind], {"key": shown(problem.key)}
        )
    raise PydanticCustomError(
        "unstorable_text",
        "At {where}: " + TEXT_PROBLEMS[problem.kind],
        {"where": shown(problem.where or "/")},
    )


SHOWN_MAX = 80  # characters of a client's key or path quoted back in an error


def shown(text: str) -> str:
    """``text`` as an error message may quote it: every character that is not printable (NUL, an
    unpaired surrogate, which no UTF-8 answer can carry) as ``\\uXXXX``, cut at :data:`SHOWN_MAX`."""
    cut = text[:SHOWN_MAX]
    escaped = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in cut)
    return escaped + ("..." if len(text) > SHOWN_MAX else "")


def _integral_number(value: Any) -> Any:
    """``5.0`` is the integer 5 in JSON Schema (and JSON has one number type): accept it as such."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@dataclass(frozen=True, slots=True)
class Integer(GroupedMetadata):
    """A JSON integer in ``[ge, le]``: strict (no ``"5"``, no ``true``), but ``5.0`` counts.

    Rules for ``Annotated[int, Integer(ge=1, le=10)]`` (pydantic unpacks grouped metadata), so
    the type checker sees the field's type, ``int``.
    """

    ge: int
    le: int

    def __iter__(self) -> Iterator[object]:
        yield Strict()
        yield Ge(self.ge)
        yield Le(self.le)
        yield BeforeValidator(_integral_number)


class _Documented:
    """Adds keywords to a type's JSON Schema: the rules a validator enforces that pydantic
    cannot derive from the type (no NUL characters, the registered job types)."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(
        self, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core)
        schema.update(self.keywords)
        return schema


NO_NUL = "^[^\\x00]*$"  # PostgreSQL text and jsonb cannot store U+0000
STORABLE_STRING: dict[str, Any] = {"type": "string", "pattern": NO_NUL}
JSON_VALUE = "JsonValue"
JSON_VALUE_REF = f"#/components/schemas/{JSON_VALUE}"
JSON_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "propertyNames": STORABLE_STRING,
    "additionalProperties": {"$ref": JSON_VALUE_REF},
}
COMPONENTS: dict[str, dict[str, Any]] = {
    JSON_VALUE: {
        "description": (
            f"Any JSON value jsonb can store: no NUL character in a string or key, "
            f"nested at most {MAX_JSON_DEPTH} levels deep."
        ),
        "anyOf": [
            {"type": ["null", "boolean", "number"]},
            STORABLE_STRING,
            {"type": "array", "items": {"$ref": JSON_VALUE_REF}},
            JSON_OBJECT_SCHEMA,
        ],
    }
}
"""Schemas the field types refer to, for the OpenAPI document's ``components``."""


@dataclass(frozen=True, slots=True)
class Text(GroupedMetadata):
    """A string PostgreSQL can store, with length bounds: ``Annotated[str, Text(max_length=9)]``."""

    min_length: int | None = None
    max_length: int | None = None

    def __iter__(self) -> Iterator[object]:
        yield from StringConstraints(strict=True, min_length=self.min_length, max_length=self.max_length)
        yield AfterValidator(_storable_text)
        yield _Documented(pattern=NO_NUL)


def _type_characters(value: str) -> str:
    problem = type_problem(value)
    if problem:
        raise PydanticCustomError("visible_characters", problem[0].upper() + problem[1:] + ".")
    return value


@dataclass(frozen=True, slots=True)
class TypeName(GroupedMetadata):
    """A job type or an idempotency key: storable text of ``min_length`` to ``max_length``
    characters, without control or invisible formatting characters (``limits.type_problem``;
    the pattern publishes it). Used as ``Annotated[str, TypeName(min_length=1, max_length=200)]``."""

    min_length: int
    max_length: int

    def __iter__(self) -> Iterator[object]:
        yield from StringConstraints(strict=True, min_length=self.min_length, max_length=self.max_length)
        yield AfterValidator(_storable_text)
        yield AfterValidator(_type_characters)
        yield _Documented(pattern=TYPE_PATTERN)


def _queue_characters(value: str) -> str:
    problem = queue_problem(value)
    if problem:
        raise PydanticCustomError("queue_name", "A queue name " + problem + ".")
    return value


# A queue's name (``limits.QUEUE_NAME_PATTERN``), published as its pattern.
QueueName = Annotated[
    str,
    StringConstraints(strict=True),
    AfterValidator(_queue_characters),
    _Documented(pattern=QUEUE_NAME_PATTERN),
]


AwareDatetime = Annotated[
    datetime,
    BeforeValidator(_aware_datetime),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": DATE_TIME_PATTERN}),
]
"""An RFC 3339 instant with an explicit offset, in years 1900 to 9998."""

JsonObject = Annotated[dict[str, Any], AfterValidator(_storable_json), WithJsonSchema(JSON_OBJECT_SCHEMA)]
"""A JSON object jsonb can store, any values inside."""
