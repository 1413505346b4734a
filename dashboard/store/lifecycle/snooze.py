"""Snoozing an attempt: running -> queued later, the attempt not counted (``snooze.sql``).

One statement, fenced by the owner and the attempt like every settle (``settle.py``): a stale
worker's snooze matches no row and returns ``None``. The attempt number is never taken back;
``snoozes`` and ``max_attempts`` both go up by one instead, so the budget the job was created
with is ``max_attempts - snoozes`` and no other statement changes.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ..connection import autocommit, fetch_job
from ..records import JobRecord
from ..sql import query
from ..values import pg_safe
from .fencing import given_now, owner

SNOOZE = query("snooze")


def snooze_job(
    job_id: uuid.UUID,
    worker_id: str,
    attempt: int,
    seconds: float,
    *,
    max_snoozes: int,
    cap_error: str,
    message: str = "Snoozed",
    progress: Sequence[dict[str, Any]] = (),
    started_at: datetime | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> JobRecord | None:
    """Put the owner's running job back to ``queued``, due ``seconds`` from now (event
    ``snoozed``, whose message is ``message``), unless it has already snoozed ``max_snoozes``
    times: then it fails for good with ``last_error`` ``cap_error`` (event ``failed``).

    Returns the job in its new state, or ``None`` if this worker no longer owns the attempt.
    ``progress`` and ``started_at`` as :func:`~.settle.complete_job`'s. ``ValueError`` naming
    ``seconds`` or ``max_snoozes`` when negative (or not finite).
    """
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
    if max_snoozes < 0:
        raise ValueError(f"max_snoozes must be >= 0, got {max_snoozes!r}")
    params = {
        **owner(job_id, worker_id, attempt),
        "now": given_now(now),
        "delay": float(seconds),
        "max_snoozes": int(max_snoozes),
        "cap_error": pg_safe(cap_error),
        "message": pg_safe(message),
        "progress": list(progress),
        "started_at": started_at,
    }
    with autocommit(conn) as conn:
        return fetch_job(conn, SNOOZE, params)
