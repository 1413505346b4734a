"""Field types shared by the API's input models: text, aware datetimes, JSON documents.

Each one refuses what PostgreSQL cannot store or what the engine would misread, so a bad
value is a 400 naming the field rather than a database error (a 500) after the fact:
NUL characters and unpaired surrogates (not storable in text or jsonb), naive datetimes (whose
instant is unknowable), non-finite numbers and absurdly deep documents.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

MAX_JSON_DEPTH = 100
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)


def text_problem(value: str) -> str | None:
    """Why PostgreSQL could not store ``value``, or ``None`` if it can."""
    if "\x00" in value:
        return "Must not contain NUL characters."
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "Must be valid Unicode (unpaired surrogate)."
    return None


def _storable_text(value: str) -> str:
    problem = text_problem(value)
    if problem:
        raise PydanticCustomError("unstorable_text", problem)
    return value


def _aware_datetime(value: Any) -> Any:
    if not isinstance(value, str):
        raise PydanticCustomError("datetime_type", "Must be an ISO 8601 date-time string with an offset.")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise PydanticCustomError(
            "datetime_parsing", "Not a valid ISO 8601 date-time (e.g. 2026-06-21T02:33:01+03:30)."
        ) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise PydanticCustomError(
            "datetime_naive", "Must include a time zone offset (e.g. +00:00 or Z): naive times are ambiguous."
        )
    try:
        in_range = EARLIEST <= parsed <= LATEST
    except OverflowError:
        in_range = False
    if not in_range:
        raise PydanticCustomError("datetime_range", "Must be between 1900-01-01 and 9999-01-01 (UTC).")
    return parsed


def _storable_json(value: Any) -> Any:
    """Walk the document (iteratively: depth is the thing being checked) for unstorable parts."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        node, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise PydanticCustomError(
                "json_depth", "Nested deeper than {limit} levels.", {"limit": MAX_JSON_DEPTH}
            )
        if isinstance(node, dict):
            for key, child in node.items():
                problem = text_problem(key)
                if problem:
                    raise PydanticCustomError("unstorable_text", "Key '{key}': " + problem, {"key": key})
                stack.append((child, depth + 1, f"{where}.{key}" if where else key))
        elif isinstance(node, list):
            stack.extend((child, depth + 1, f"{where}[{i}]") for i, child in enumerate(node))
        elif isinstance(node, str):
            problem = text_problem(node)
            if problem:
                raise PydanticCustomError(
                    "unstorable_text", "At {where}: " + problem, {"where": where or "/"}
                )
        elif isinstance(node, float) and not math.isfinite(node):
            raise PydanticCustomError("json_number", "Numbers must be finite.")
    return value


def Text(*, min_length: int | None = None, max_length: int | None = None) -> Any:
    """A string PostgreSQL can store, with length bounds."""
    constraints = StringConstraints(strict=True, min_length=min_length, max_length=max_length)
    return Annotated[str, constraints, AfterValidator(_storable_text)]


AwareDatetime = Annotated[
    datetime,
    BeforeValidator(_aware_datetime),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""An ISO 8601 instant with an explicit offset."""

JsonObject = Annotated[dict[str, Any], AfterValidator(_storable_json)]
"""A JSON object jsonb can store, any values inside."""
