"""Plain results the store returns: no ORM objects escape its write path."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import RowMapping

WAITING_YEAR = 9999  # states.WAITING_AT's year: no instant a client gives reaches it

Row = Mapping[str, Any] | RowMapping  # a row read by column name: SQLAlchemy's, or a plain dict


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: uuid.UUID
    type: str
    payload: Any
    status: str
    priority: int
    available_at: datetime
    attempts: int
    max_attempts: int
    idempotency_key: str | None
    locked_by: str | None
    locked_until: datetime | None
    last_error: str
    result: Any
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    cancelled_at: datetime | None = None  # an operator cancelled it (status failed)
    queue: str = "default"  # its named queue (jobs_queue)
    # Workflows: its parents (None: none), what a parent's failure does, its workflow, how
    # many parents it still waits for (a waiting job's available_at is states.WAITING_AT).
    depends_on: list[uuid.UUID] | None = None
    on_parent_failure: str | None = None
    workflow: str | None = None
    waiting_on: int = 0
    # Uniqueness windows: the key, its window (seconds) and the states it holds in.
    unique_key: str | None = None
    unique_for: float | None = None
    unique_while: str | None = None
    unique_retired_at: datetime | None = None  # a later create took its key
    snoozes: int = 0  # attempts that snoozed (each added one to max_attempts: settle.sql)
    traceparent: str | None = None  # the W3C trace context of its create (dashboard/tracing.py)

    @property
    def cancelled(self) -> bool:
        return self.cancelled_at is not None

    @property
    def waiting(self) -> bool:
        """Queued and waiting for parents: no claim takes it until they release it."""
        return self.status == "queued" and self.available_at.year == WAITING_YEAR

    @property
    def unique_until(self) -> datetime | None:
        """The end of its key's window (``None``: no window)."""
        return None if self.unique_for is None else self.created_at + timedelta(seconds=self.unique_for)

    @classmethod
    def from_row(cls, row: Row) -> JobRecord:
        """From a row with the job's columns; ``cancelled_at``, ``queue`` and the workflow
        columns may be left out."""
        return cls(**{name: row[name] for name in JOB_FIELDS if name in row})


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: int
    job_id: uuid.UUID
    type: str
    attempt: int
    worker_id: str | None
    message: str
    data: Any
    created_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> EventRecord:
        return cls(**{name: row[name] for name in EVENT_FIELDS})


@dataclass(frozen=True, slots=True)
class CreateResult:
    job: JobRecord
    created: bool  # False: an existing job with this idempotency key was returned


@dataclass(frozen=True, slots=True)
class RescueResult:
    requeued: list[uuid.UUID]
    failed: list[uuid.UUID]

    @property
    def count(self) -> int:
        return len(self.requeued) + len(self.failed)


JOB_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(JobRecord))
EVENT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(EventRecord))
