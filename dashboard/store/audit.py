"""The audit log (``jobs_audit``): operator actions whose subject is gone afterwards, who
paused, resumed or limited a queue (``queues.sql``), and who paused or resumed a schedule
(``schedules.sql``).

A deleted job takes its events with it, and a removed worker row leaves nothing behind, so
the statements that do either (``delete`` in actions.sql, ``worker_remove`` in workers.sql) write one
row here each, in the same statement: who (the actor and the rest of the request's audit
data), when, and what was deleted (a job's id, type, status and dates; a worker's host, pid and
last heartbeat). Nothing updates or deletes these rows. Reads: newest first by id (its primary
key, read backwards), a page at a time; one job's entries through ``jobs_audit_job_idx``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .reading import reading
from .sql import query

PAGE = 50


@dataclass(frozen=True)
class AuditRecord:
    id: int
    created_at: datetime
    # job_deleted | worker_removed | queue_paused | queue_resumed | queue_limits_changed
    # | schedule_paused | schedule_resumed
    action: str
    actor: str
    job_id: uuid.UUID | None
    job_type: str | None
    job_status: str | None
    worker_id: str | None
    data: Any

    @property
    def bulk(self) -> bool:
        return isinstance(self.data, dict) and bool(self.data.get("bulk"))


PAGE_SQL = query("audit_page")
JOB_SQL = query("audit_of_job")


@dataclass(frozen=True)
class AuditPage:
    entries: list[AuditRecord]
    older: int | None  # the ``before`` of the next page, if there is one


def page(*, before: int | None = None, limit: int = PAGE) -> AuditPage:
    """The newest ``limit`` entries (older than ``before``, an id, when given)."""
    with reading() as conn:
        rows = conn.execute(PAGE_SQL, {"before": before, "limit": limit + 1}).mappings().all()
    entries = [AuditRecord(**row) for row in rows[:limit]]
    return AuditPage(entries, entries[-1].id if len(rows) > limit and entries else None)


def for_job(job_id: uuid.UUID) -> list[AuditRecord]:
    """What the log says about one job (its deletion), newest first."""
    with reading() as conn:
        return [AuditRecord(**row) for row in conn.execute(JOB_SQL, {"job_id": job_id}).mappings()]
