"""Waiting on conditions (never on the clock), snapshots of both tables, and job timelines."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.records import EventRecord, JobRecord
from tests.support.waiting import wait_until  # noqa: F401  (re-exported for this folder's tests)


def job(job_id: uuid.UUID) -> JobRecord:
    found = read_jobs.get_job(job_id)
    assert found is not None, f"job {job_id} is gone"
    return found


def timeline(job_id: uuid.UUID) -> list[EventRecord]:
    return read_jobs.job_events(job_id)


def story(job_id: uuid.UUID) -> list[tuple[str, int]]:
    """The job's events as ``(type, attempt)``, without progress and lease renewals."""
    return [(e.type, e.attempt) for e in timeline(job_id) if e.type not in ("progress", "lease_renewed")]


def table_snapshot() -> dict[str, Any]:
    """Every row of both tables, to prove a refused request changed nothing."""
    with db.engine.connect() as conn:
        jobs = conn.execute(text("SELECT * FROM jobs_job ORDER BY id")).mappings().all()
        events = conn.execute(text("SELECT * FROM jobs_jobevent ORDER BY id")).mappings().all()
    return {"jobs": [dict(r) for r in jobs], "events": [dict(r) for r in events]}
