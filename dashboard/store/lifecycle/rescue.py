"""Rescue: running jobs whose lease expired go back to queued (backoff) or fail, in batches
(``rescue.sql``), their ``last_error`` naming the lease and its owner."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from ..connection import autocommit, fetch_rows
from ..records import RescueResult
from ..sql import query
from .backoff import delay_table
from .fencing import given_now

RESCUE_EXPIRED = query("rescue_expired")


def rescue_expired_jobs(
    worker_id: str | None,
    *,
    batch_size: int,
    backoff_base_seconds: float,
    backoff_max_seconds: float,
    now: datetime | None = None,
    conn: Connection | None = None,
) -> RescueResult:
    """Recover up to ``batch_size`` running jobs whose lease has expired.

    Each is requeued after its backoff (event ``timeout_requeued``) or, with no attempts
    left, failed (event ``failed``). ``last_error`` says which lease expired and whose it was.
    """
    params = {
        "worker_id": worker_id,
        "now": given_now(now),
        "batch": batch_size,
        "delays": delay_table(backoff_base_seconds, backoff_max_seconds),
        "max_delay": float(backoff_max_seconds),
    }
    with autocommit(conn) as conn:
        rows = fetch_rows(conn, RESCUE_EXPIRED, params)
    return RescueResult(
        requeued=[row["id"] for row in rows if row["status"] == "queued"],
        failed=[row["id"] for row in rows if row["status"] == "failed"],
    )
