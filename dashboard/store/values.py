"""Values every transition normalises: the clock, aware datetimes, text PostgreSQL can store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def utcnow() -> datetime:
    return datetime.now(UTC)


def aware(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")
    return value


def pg_safe(value: Any) -> Any:
    """Replace NUL characters, which PostgreSQL text and jsonb cannot store.

    Error messages and tracebacks come from arbitrary handler code; they must never make the
    failure itself unrecordable.
    """
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {pg_safe(str(k)): pg_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [pg_safe(v) for v in value]
    return value
