"""``jobs_job`` and ``jobs_jobevent``: the job rows and their event log.

The row shape is enforced by PostgreSQL, not by hope: a job that is queued holds no lock and
no finish time, a running job holds both lock fields, a finished one holds a finish time and no
lock. The service functions keep to these rules; the constraints make a bug that breaks them
fail loudly instead of leaving a job no worker will ever pick up.

Each index is here for one query, named beside it. The statements that move a job live whole
in ``store/lifecycle/*.sql``; the reads in ``store/reads/``. The other tables (workers,
schedules, audit, queues) are in ``tables.py``.
"""

from __future__ import annotations

import string
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
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

from ..config.rules import QUEUE_NAME_MAX_LENGTH, TYPE_MAX_LENGTH, UNIQUE_KEY_MAX_LENGTH, WORKFLOW_MAX_LENGTH
from ..extensions import db
from .states import CHART_EVENTS, EVENT_TYPES

if TYPE_CHECKING:
    # ``db.Model`` is made at run time, so the type checker cannot see it as a class; it is a
    # declarative base, which is what the checker is shown (Mapped columns typed as declared).
    from sqlalchemy.orm import DeclarativeBase as Model
else:
    Model = db.Model

# The error text as the search index holds it (job_error_fts_idx; migration 0009 spells the same
# SQL): every ASCII punctuation character a space, then the simple parser's words, so
# "smtp.example.com:25" is indexed as smtp, example, com, 25 in that order.
ERROR_SEPARATORS = string.punctuation
ERROR_VECTOR_SQL = (
    "to_tsvector('simple'::regconfig, translate(last_error, '"
    + ERROR_SEPARATORS.replace("'", "''")
    + "', '"
    + " " * len(ERROR_SEPARATORS)
    + "'))"
)

STATUS_SHAPE_SQL = (
    "(status = 'queued' AND locked_by IS NULL AND locked_until IS NULL AND finished_at IS NULL)"
    " OR (status = 'running' AND locked_by IS NOT NULL AND locked_until IS NOT NULL"
    " AND finished_at IS NULL)"
    " OR (status IN ('succeeded', 'failed') AND locked_by IS NULL AND locked_until IS NULL"
    " AND finished_at IS NOT NULL)"
)
ATTEMPTS_SQL = "attempts >= 0 AND max_attempts >= 1 AND attempts <= max_attempts"
CANCELLED_SHAPE_SQL = "cancelled_at IS NULL OR status = 'failed'"
UNIQUE_SHAPE_SQL = (
    "(unique_key IS NULL AND unique_for IS NULL AND unique_while IS NULL)"
    " OR (unique_key IS NOT NULL AND unique_while IN ('queued', 'active')"
    " AND (unique_for IS NULL OR unique_for > 0))"
)
EVENT_TYPE_SQL = "type IN (" + ", ".join(f"'{t}'" for t in EVENT_TYPES) + ")"
QUEUED, RETRIED = text("status = 'queued'"), "least(attempts, 1)"
CHART_EVENTS_SQL = text("type IN (" + ", ".join(f"'{t}'" for t in CHART_EVENTS) + ")")


class Job(Model):
    """The source of truth for queue state."""

    __tablename__ = "jobs_job"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    type: Mapped[str] = mapped_column(String(TYPE_MAX_LENGTH))
    payload: Mapped[Any] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    status: Mapped[str] = mapped_column(String(16), server_default=text("'queued'"))
    priority: Mapped[int] = mapped_column(SmallInteger, server_default=text("50"))
    available_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    max_attempts: Mapped[int] = mapped_column(Integer, server_default=text("3"))
    idempotency_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    locked_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    locked_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_error: Mapped[str] = mapped_column(Text, server_default=text("''"))
    result: Mapped[Any | None] = mapped_column(JSONB, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Set when an operator cancelled the queued job (it is then ``failed``, the four stored
    # states unchanged), cleared by a retry: lists, figures and metrics tell cancels apart.
    cancelled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The named queue it belongs to (``jobs_queue``); ``default`` unless the create names one.
    queue: Mapped[str] = mapped_column(String(QUEUE_NAME_MAX_LENGTH), server_default=text("'default'"))
    # Workflows (migration 0018): the parents it waits for (NULL: none), what a parent's failure
    # does to it, the workflow it belongs to, how many parents it still waits for, whether any
    # job names it as a parent (the release trigger fires only then), and the earliest time it
    # may run once released. A waiting job is queued with available_at = WAITING_AT.
    depends_on: Mapped[list[uuid.UUID] | None] = mapped_column(ARRAY(Uuid), nullable=True)
    on_parent_failure: Mapped[str | None] = mapped_column(String(8), nullable=True)
    workflow: Mapped[str | None] = mapped_column(String(WORKFLOW_MAX_LENGTH), nullable=True)
    waiting_on: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    has_dependents: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    not_before: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Uniqueness windows (migration 0019, lifecycle/unique.py): the key, its window in seconds,
    # the states it holds in, and when a later create took the key from it (NULL: it holds it).
    unique_key: Mapped[str | None] = mapped_column(String(UNIQUE_KEY_MAX_LENGTH), nullable=True)
    unique_for: Mapped[float | None] = mapped_column(Float, nullable=True)
    unique_while: Mapped[str | None] = mapped_column(String(8), nullable=True)
    unique_retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Migration 0020: attempts that snoozed (each also adds one to max_attempts, so the budget
    # it was created with is max_attempts - snoozes); the W3C trace context of its create.
    snoozes: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    traceparent: Mapped[str | None] = mapped_column(String(55), nullable=True)

    __table_args__ = (
        CheckConstraint(STATUS_SHAPE_SQL, name="job_status_valid_shape"),
        CheckConstraint(ATTEMPTS_SQL, name="job_attempts_valid"),
        CheckConstraint(CANCELLED_SHAPE_SQL, name="job_cancelled_shape"),
        CheckConstraint("snoozes >= 0 AND snoozes < max_attempts", name="job_snoozes_valid"),
        CheckConstraint(
            "on_parent_failure IS NULL OR on_parent_failure IN ('cancel', 'run', 'wait')",
            name="job_on_parent_failure_valid",
        ),
        CheckConstraint(UNIQUE_SHAPE_SQL, name="job_unique_valid"),
        # The one job holding a unique key (``create_unique`` in unique.sql, ON CONFLICT): only
        # jobs with a key that no later create took have an entry (lifecycle/unique.py).
        Index(
            "job_unique_key_idx",
            "unique_key",
            unique=True,
            postgresql_where=text("unique_key IS NOT NULL AND unique_retired_at IS NULL"),
        ),
        # A workflow's jobs and its counts by status; the newest jobs of any workflow (the
        # recent workflows). Only jobs of a workflow have entries (reads/workflows.py).
        Index("job_workflow_idx", "workflow", "status", postgresql_where=text("workflow IS NOT NULL")),
        Index(
            "job_workflow_created_idx",
            text("created_at DESC"),
            text("id DESC"),
            postgresql_where=text("workflow IS NOT NULL"),
        ),
        # Job list filtered by status (``find_jobs.list_jobs``).
        Index("jobs_job_status_idx", "status"),
        Index("jobs_job_available_at_idx", "available_at"),
        # Job list ordering, newest first by (created_at, id) (``find_jobs.list_jobs``): the id
        # orders the jobs one statement created at one instant, so a page among them stops at
        # its last row instead of sorting them all.
        Index("jobs_job_created_at_idx", "created_at", "id"),
        # The job list's type filter (``find_jobs.list_jobs``: one type's jobs, or one type's jobs in
        # one status, newest first) and the skip scan that lists the distinct types
        # (``read_stats.JOB_TYPES_SQL``).
        Index("job_type_created_idx", "type", "status", text("created_at DESC"), text("id DESC")),
        # The claim index, under the name the contract fixes: every queue's queued rows in claim order
        # (the "next to run" list, the metrics' queued walk). Only queued rows, so it stays
        # small while finished rows pile up. Priority must come first: with available_at first
        # PostgreSQL sorts every queued row on each read in this order (docs/benchmarks.md).
        Index(
            "job_claim_idx",
            text("priority DESC"),
            "available_at",
            "created_at",
            "id",
            postgresql_where=text("status = 'queued'"),
        ),
        # The per-queue claim (``claim``, ``claim_one`` and the claim half of
        # ``complete_and_claim``): each served queue's own range in claim order, so a claim for
        # a quiet queue never walks another queue's backlog (migration 0011).
        Index(
            "job_queue_claim_idx",
            "queue",
            text("priority DESC"),
            "available_at",
            "created_at",
            "id",
            postgresql_where=text("status = 'queued'"),
        ),
        # The lists' queue filter, newest first (``find_jobs.list_jobs``). Partial: the default
        # queue's jobs have no entry, so a deployment that never names a queue never writes it.
        Index(
            "job_queue_created_idx",
            "queue",
            "status",
            text("created_at DESC"),
            text("id DESC"),
            postgresql_where=text("queue <> 'default'"),
        ),
        # Each queue's live figures (``reads/queues.py``): ready / scheduled / retrying as capped
        # ranges and its oldest ready job, as job_queued_idx gives them for all (migration 0011);
        # and the claims' `limits_open`: a limited queue's first due job (claim.sql).
        Index(
            "job_queued_queue_idx",
            "queue",
            text("least(attempts, 1)"),
            "available_at",
            postgresql_where=text("status = 'queued'"),
        ),
        # Retention (``prune_batch`` in retention.sql): the oldest finished jobs first.
        Index(
            "job_finished_idx",
            "status",
            "finished_at",
            postgresql_where=text("status IN ('succeeded', 'failed')"),
        ),
        # The overview's live figures (``read_overview``): ready / scheduled / retrying as
        # capped ranges, the oldest ready job, the same per type, failures of the last 24 h.
        Index("job_queued_idx", text(RETRIED), "available_at", postgresql_where=QUEUED),
        Index("job_queued_type_idx", "type", text(RETRIED), "available_at", postgresql_where=QUEUED),
        # Failures of the last 24 hours per type; cancels are not failures (migration 0010).
        Index(
            "job_failure_type_idx",
            "type",
            "finished_at",
            postgresql_where=text("status = 'failed' AND cancelled_at IS NULL"),
        ),
        # The stats' oldest queued job: its first live entry (migration 0022). Only queued rows:
        # a claim or a settle never writes to it. `max_attempts >= 1` holds for every row
        # (job_attempts_valid); only the stats' statement says it, so no other plan takes this.
        Index(
            "job_oldest_queued_idx",
            "created_at",
            postgresql_where=text("status = 'queued' AND max_attempts >= 1"),
        ),
        # The cancelled list, newest first, and its count: only cancelled rows (migration 0010).
        Index(
            "job_cancelled_idx",
            text("created_at DESC"),
            text("id DESC"),
            postgresql_where=text("cancelled_at IS NOT NULL"),
        ),
        # The rescue of expired leases (``rescue_expired`` in rescue.sql): only running rows.
        Index("job_timeout_idx", "locked_until", postgresql_where=text("status = 'running'")),
        # Search by error text, any status (``error_search.ERROR_VECTOR``): the error with its ASCII
        # punctuation turned into separators, so host names, dotted names and paths are found by
        # their parts. Partial: a job that never failed has no entry, so the drain path (creates,
        # claims, successes) never writes to it; migration 0009.
        Index(
            "job_error_fts_idx",
            text(ERROR_VECTOR_SQL),
            postgresql_using="gin",
            postgresql_where=text("last_error <> ''"),
        ),
        # The newest errors in the list's order, for an error search read newest first
        # (``error_search.newest``). Partial like job_error_fts_idx: the drain path never
        # writes to it; migration 0015.
        Index(
            "job_error_created_idx",
            text("created_at DESC"),
            text("id DESC"),
            postgresql_where=text("last_error <> ''"),
        ),
        # Idempotent create (``create`` in create.sql, ON CONFLICT): unique only when a key is given.
        Index(
            "job_idempotency_key_unique",
            "idempotency_key",
            unique=True,
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
        # A schedule's runs by key prefix (``schedule_runs`` in schedules.sql, the search's
        # ``schedule:{name}:`` arm): text_pattern_ops orders the key by its bytes, so a prefix
        # is one range (``~>=~`` / ``~<~``) in any database collation. Partial: only runs of
        # schedules have an entry (migration 0012).
        Index(
            "job_schedule_key_idx",
            "idempotency_key",
            postgresql_ops={"idempotency_key": "text_pattern_ops"},
            postgresql_where=text("idempotency_key LIKE 'schedule:%'"),
        ),
    )


class JobEvent(Model):
    """Append-only timeline. It explains how a job got where it is; it does not decide it."""

    __tablename__ = "jobs_jobevent"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    # A job's id, kept by triggers rather than a foreign key (migration 0024): an event whose
    # job is missing is refused (23503), a deleted job's events go with it.
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    type: Mapped[str] = mapped_column(String(32))
    attempt: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    worker_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    message: Mapped[str] = mapped_column(Text, server_default=text("''"))
    data: Mapped[Any] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        CheckConstraint(EVENT_TYPE_SQL, name="job_event_type_valid"),
        # Global feed filtered by type (``read_jobs.list_events``).
        Index("jobs_jobevent_type_idx", "type"),
        # The charts' events in time order (``read_overview.figures``): claims and outcomes only.
        Index("jobs_jobevent_created_at_idx", "created_at", postgresql_where=CHART_EVENTS_SQL),
        # One job's timeline in id order (``read_jobs.job_events``).
        Index("job_event_job_id_idx", "job_id", "id"),
        # Global feed, newest first by id, cursor-paginated (``read_jobs.list_events``).
        Index("job_event_id_idx", "id"),
    )


class JobDependency(Model):
    """One edge of a workflow: ``child_id`` waits for ``parent_id``. Written with the dependent
    (``create_dependent``, dependents.sql) and never updated; read by its primary key, parent
    first: the release trigger's "dependents of this parent" (migration 0023), the job page's
    dependents and retention's guard. It goes when its parent is deleted; one whose dependent
    is gone names no job and every reader skips it. No foreign keys: a parent may be deleted
    by retention while its dependent lives on, and neither end's writes should check the other."""

    __tablename__ = "jobs_job_dependency"

    parent_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    child_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)


class JobWaiting(Model):
    """How many parents a waiting job still waits for, apart from its row: written with a
    dependent created with more than one parent to wait for (``create_dependent``), taken one
    off by each settle of a parent but the last, deleted by the release trigger's own path (which
    folds the count back into ``jobs_job.waiting_on``) and by the cancels (migration 0025). A
    narrow row, so that a fan-in's settles do not write the dependent's wide one. Readers take
    its count through ``jobs_waiting_on(id, waiting_on)``. No foreign key, as for the edges."""

    __tablename__ = "jobs_job_waiting"
    __table_args__ = (CheckConstraint("waiting_on > 0", name="jobs_job_waiting_positive"),)

    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    waiting_on: Mapped[int] = mapped_column(Integer)
