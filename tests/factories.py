"""Jobs in any status, with the other fields consistent with it (the row-shape rules)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert

from dashboard.extensions import db
from dashboard.store import read_jobs
from dashboard.store.models import Job
from dashboard.store.records import JobRecord
from dashboard.store.service import utcnow


def make_job(status: str = "queued", *, now: datetime | None = None, **fields: Any) -> JobRecord:
    """Insert one job directly (no events), shaped for ``status`` unless overridden."""
    now = now or utcnow()
    row: dict[str, Any] = {
        "id": uuid.uuid4(),
        "type": "demo.success",
        "payload": {},
        "status": status,
        "priority": 50,
        "available_at": now,
        "attempts": 0,
        "max_attempts": 3,
        "idempotency_key": None,
        "locked_by": None,
        "locked_until": None,
        "last_error": "",
        "result": None,
        "created_at": now,
        "updated_at": now,
        "finished_at": None,
    }
    if status == "running":
        row.update(attempts=1, locked_by="factory:1:thread-1:abcd", locked_until=now + timedelta(seconds=30))
    elif status == "succeeded":
        row.update(attempts=1, result={"ok": True}, finished_at=now)
    elif status == "failed":
        row.update(attempts=3, last_error="boom", finished_at=now)
    row.update(fields)
    with db.engine.begin() as conn:
        conn.execute(insert(Job.__table__).values(**row))
    job = read_jobs.get_job(row["id"])
    assert job is not None
    return job
