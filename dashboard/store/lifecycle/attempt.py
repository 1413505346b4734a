"""An attempt while it runs: the lease renewed, progress recorded (``attempt.sql``).

Each is one statement fenced by the owner and the attempt (``locked_by`` + ``attempts``): a
call that matches no row returns ``None`` (a stale worker, fenced off), not an error.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ..connection import autocommit, fetch_rows
from ..sql import query
from ..values import aware as _aware
from ..values import pg_safe, utcnow
from .fencing import given_now, owner

RENEW, PROGRESS, PARENT_RESULTS = query("renew"), query("progress"), query("parent_results")
PARENT_RESULT_MAX_BYTES = 1 << 20  # a parent's result handed on, as stored (compressed or not)


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


def parent_results(
    parents: Sequence[uuid.UUID], *, max_bytes: int = PARENT_RESULT_MAX_BYTES, conn: Connection | None = None
) -> tuple[dict[str, Any], list[uuid.UUID]]:
    """The results of ``parents`` (a starting attempt's ``depends_on``) in one read: a dict from
    parent id (as a string) to its ``result``, and the parents whose stored result is larger
    than ``max_bytes`` (handed on as ``None``). A parent gone (retention) is left out."""
    with autocommit(conn) as conn:
        rows = fetch_rows(conn, PARENT_RESULTS, {"ids": list(parents), "max_bytes": max_bytes})
    found = {row["id"]: row for row in rows}
    results = {str(parent): found[parent]["result"] for parent in parents if parent in found}
    return results, [row["id"] for row in rows if row["too_big"]]
