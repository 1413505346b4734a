"""The tables beside the jobs: worker heartbeats, schedules, the audit log, and the queues'
settings, slots and rate rings (flow control).

Like ``models.py``, each index is here for one query, named beside it; the statements that use
these tables live whole in the ``.sql`` files of ``store/workers``, ``store/audit`` and
``store/flow/``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from ..config.rules import NAME_MAX_LENGTH, QUEUE_NAME_MAX_LENGTH, TYPE_MAX_LENGTH, UNIQUE_KEY_MAX_LENGTH
from ..extensions import db

if TYPE_CHECKING:  # as in models.py: db.Model is made at run time
    from sqlalchemy.orm import DeclarativeBase as Model
else:
    Model = db.Model


class WorkerProcess(Model):
    """One ``flask worker`` process, as its heartbeat thread last reported it.

    Upserted every ``JOB_WORKER_HEARTBEAT_SECONDS`` by ``runtime/heartbeat.py``; ``stopped_at``
    is set on a clean exit. A row whose ``last_seen`` is older than three of its own intervals
    is stale (the process died or lost the database). Rows stopped or stale for a day are
    deleted by the heartbeats of the living. Small: one row per process start.
    """

    __tablename__ = "jobs_worker"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)  # "host:pid:random"
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    mode: Mapped[str] = mapped_column(String(16))
    threads: Mapped[int] = mapped_column(Integer)
    busy: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    jobs_done: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    stopped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    version: Mapped[str] = mapped_column(String(64), server_default=text("''"))
    interval_seconds: Mapped[float] = mapped_column(Float)
    job_types: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=text("'{}'"))
    # Each thread, idle or running an attempt (job, attempt, since, lease), as last reported.
    activity: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    # The queues it claims from (``--queues``); NULL: every queue (migration 0016).
    queues: Mapped[list[str] | None] = mapped_column(ARRAY(Text), nullable=True)

    __table_args__ = (Index("jobs_worker_last_seen_idx", "last_seen"),)


class Schedule(Model):
    """A recurring job declared in code (``runtime/schedules.py``), and its runtime state.

    Workers upsert their declarations at start (``schedules.sync``) and fire due rows
    (``schedules.fire_due``). A declaration the code no longer makes is retired
    (``retired_at``), never deleted: its runs keep their link. One row per name: a few rows.
    """

    __tablename__ = "jobs_schedule"

    name: Mapped[str] = mapped_column(String(NAME_MAX_LENGTH), primary_key=True)
    cron: Mapped[str] = mapped_column(String(255))
    timezone: Mapped[str] = mapped_column(String(64))
    job_type: Mapped[str] = mapped_column(String(TYPE_MAX_LENGTH))
    payload: Mapped[Any] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    queue: Mapped[str] = mapped_column(String(NAME_MAX_LENGTH), server_default=text("'default'"))
    priority: Mapped[int] = mapped_column(SmallInteger, server_default=text("50"))
    max_attempts: Mapped[int] = mapped_column(Integer, server_default=text("3"))
    missed: Mapped[str] = mapped_column(String(8), server_default=text("'latest'"))
    paused: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    paused_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    paused_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    next_run_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_run_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_fired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)  # no FK: prune may delete it
    fired_count: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    skipped_count: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    declared_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The unique options its runs carry (migration 0019); NULL: none.
    unique_key: Mapped[str | None] = mapped_column(String(UNIQUE_KEY_MAX_LENGTH), nullable=True)
    unique_for: Mapped[float | None] = mapped_column(Float, nullable=True)
    unique_while: Mapped[str | None] = mapped_column(String(8), nullable=True)

    __table_args__ = (
        CheckConstraint("missed IN ('latest', 'all')", name="schedule_missed_valid"),
        # The due schedules (``schedule_lock_due``, ``schedule_next_due``): active rows only.
        Index("schedule_due_idx", "next_run_at", postgresql_where=text("NOT paused AND retired_at IS NULL")),
    )


class AuditEntry(Model):
    """An operator action whose subject is gone afterwards, so its own events cannot tell it:
    a finished job deleted (its events go with it), a worker row removed. Append-only."""

    __tablename__ = "jobs_audit"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    action: Mapped[str] = mapped_column(String(32))  # job_deleted | worker_removed
    actor: Mapped[str] = mapped_column(String(255), server_default=text("''"))
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    job_type: Mapped[str | None] = mapped_column(String(TYPE_MAX_LENGTH), nullable=True)
    job_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    worker_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    data: Mapped[Any] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))

    # "Who deleted this job?" (the job page of a deleted id); the log reads newest first by id.
    __table_args__ = (Index("jobs_audit_job_idx", "job_id", postgresql_where=text("job_id IS NOT NULL")),)


class Queue(Model):
    """A named queue's settings, in force for every worker: paused, its concurrency limit and
    rate limit, and who changed them when. One row per queue that has had a job or a setting
    (a create adds its queue's row); the claim reads them at statement time (claim.sql)."""

    __tablename__ = "jobs_queue"

    name: Mapped[str] = mapped_column(String(QUEUE_NAME_MAX_LENGTH), primary_key=True)
    paused: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    paused_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    paused_by: Mapped[str] = mapped_column(String(255), server_default=text("''"))
    concurrency_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    rate_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    rate_period_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    changed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    changed_by: Mapped[str] = mapped_column(String(255), server_default=text("''"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))

    __table_args__ = (
        CheckConstraint("concurrency_limit IS NULL OR concurrency_limit >= 1"),
        CheckConstraint("rate_count IS NULL OR rate_count >= 1"),
        CheckConstraint("rate_period_seconds IS NULL OR rate_period_seconds > 0"),
        CheckConstraint(
            "(rate_count IS NULL) = (rate_period_seconds IS NULL)", name="queue_rate_limit_whole"
        ),
    )


class QueueSlot(Model):
    """One unit of a queue's concurrency limit: free, or held by one running attempt.

    A claim takes free slots (FOR UPDATE SKIP LOCKED; the lock re-reads the newest row, so two
    claimers never take one slot) and writes (job_id, attempt); every fenced statement that
    ends that attempt frees it in the same statement (settle.sql, rescue.sql)."""

    __tablename__ = "jobs_queue_slot"

    queue: Mapped[str] = mapped_column(
        String(QUEUE_NAME_MAX_LENGTH), ForeignKey("jobs_queue.name", ondelete="CASCADE"), primary_key=True
    )
    n: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    attempt: Mapped[int | None] = mapped_column(Integer, nullable=True)

    __table_args__ = (
        CheckConstraint("(job_id IS NULL) = (attempt IS NULL)", name="queue_slot_shape"),
        # The settles' probe ("the slot of this attempt"), and one slot per job at most.
        Index(
            "job_queue_slot_job_unique", "job_id", unique=True, postgresql_where=text("job_id IS NOT NULL")
        ),
    )


class QueueRate(Model):
    """One entry of a queue's rate-limit ring: the time of the claim that last took it. A claim
    may take an entry older than the period, so any window of the period holds at most
    ``rate_count`` claims."""

    __tablename__ = "jobs_queue_rate"

    queue: Mapped[str] = mapped_column(
        String(QUEUE_NAME_MAX_LENGTH), ForeignKey("jobs_queue.name", ondelete="CASCADE"), primary_key=True
    )
    n: Mapped[int] = mapped_column(Integer, primary_key=True)
    taken_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("'-infinity'"))
