"""An attempt while it runs: the lease renewed, progress recorded (``attempt.sql``).

Each is one statement fenced by the owner and the attempt (``locked_by`` + ``attempts``): a
call that matches no row returns ``None`` (a stale worker, fenced off), not an error.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ..connection import autocommit, fetch_rows
from ..sql import query
from ..values import aware as _aware
from ..values import pg_safe, utcnow
from .fencing import given_now, owner

RENEW, PROGRESS = query("renew"), query("progress")


def renew_lease(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    *,
    lease_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> datetime | None:
    """Extend the lease to ``lease_seconds`` after the renewal takes effect (the database's
    clock, unless ``now`` is given); return the new ``locked_until``, or ``None`` if ownership
    is lost."""
    params = {
        **owner(job_id, worker_id, attempt),
        "now": given_now(now),
        "lease_seconds": float(lease_seconds),
    }
    with autocommit(conn) as conn:
        found = fetch_rows(conn, RENEW, params)
        return found[0]["locked_until"] if found else None


def record_progress(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    *,
    message: str = "",
    data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> int | None:
    """Append a ``progress`` event; return its id, or ``None`` if ownership is lost."""
    params = {
        **owner(job_id, worker_id, attempt),
        "now": _aware(now or utcnow(), "now"),
        "message": pg_safe(message),
        "data": pg_safe(data or {}),
    }
    with autocommit(conn) as conn:
        found = fetch_rows(conn, PROGRESS, params)
        return found[0]["id"] if found else None


def progress_report(
    message: str = "", data: dict[str, Any] | None = None, *, now: datetime | None = None
) -> dict[str, Any]:
    """A progress report held back to be written with the attempt's settle (``progress=`` of
    the settle calls below): the event :func:`record_progress` would write, as a value."""
    at = _aware(now or utcnow(), "now")
    return {"message": pg_safe(message), "data": pg_safe(data or {}), "created_at": at.isoformat()}
