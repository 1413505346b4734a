"""Shortcuts for engine tests: the default policy, spelled once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from dashboard.store import lifecycle
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.records import JobRecord

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LEASE = 30.0
BACKOFF = {"backoff_base_seconds": 5.0, "backoff_max_seconds": 300.0}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def claim(worker: str, now: datetime = T0, lease: float = LEASE) -> JobRecord | None:
    return lifecycle.claim_next_job(worker, lease_seconds=lease, now=now)


def fail(job: JobRecord, worker: str, error: str = "boom", now: datetime = T0) -> JobRecord | None:
    return lifecycle.fail_job(job.id, worker, job.attempts, error, now=now, **BACKOFF)


def cleanup(now: datetime, worker: str = "cleaner", batch: int = 100):
    return lifecycle.rescue_expired_jobs(worker, batch_size=batch, now=now, **BACKOFF)


def event_types(job_id: uuid.UUID) -> list[str]:
    return [e.type for e in read_jobs.job_events(job_id)]


def fresh(job_id: uuid.UUID) -> JobRecord:
    job = read_jobs.get_job(job_id)
    assert job is not None
    return job


def record_statements(monkeypatch) -> list:
    """The statements the claims and settles send from now on, in order (each one's ``query()``
    object)."""
    sent: list = []
    for module in (lifecycle.claim, lifecycle.settle):
        fetch_rows = module.fetch_rows
        monkeypatch.setattr(
            module,
            "fetch_rows",
            lambda conn, statement, params, fetch_rows=fetch_rows: (
                sent.append(statement) or fetch_rows(conn, statement, params)
            ),
        )
    return sent
