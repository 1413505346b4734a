"""Operator console: search by failed-job error text, two operator event types,
and the worker heartbeat table.

- ``job_failed_error_fts_idx``: GIN on ``to_tsvector('simple', last_error)`` WHERE
  ``status = 'failed'``. Partial, so the drain path never writes to it: claims and successes
  touch rows that are not failed, and only a job failing for good adds an entry. (pg_trgm would
  allow infix matches, but it is a contrib extension the embedded server does not ship.)
  Built CONCURRENTLY on a table of :data:`CONCURRENT_FROM_ROWS` rows or more, plainly on a new
  or small one, as 0004 and 0006 do.
- ``job_event_type_valid`` also allows ``cancelled`` and ``rescheduled`` (bulk and single-job
  cancel and run-now). Added NOT VALID and validated separately: the validation scans the
  events without blocking writers.
- ``jobs_worker``: one row per ``flask worker`` process, upserted by its heartbeat thread.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

CONCURRENT_FROM_ROWS = 10_000
OLD_TYPES = (
    "created",
    "claimed",
    "progress",
    "lease_renewed",
    "succeeded",
    "retry_scheduled",
    "failed",
    "timeout_requeued",
    "manual_retry",
)
NEW_TYPES = (*OLD_TYPES, "cancelled", "rescheduled")
FTS = "to_tsvector('simple', last_error)"


def _type_check(types):
    return "type IN (" + ", ".join(f"'{t}'" for t in types) + ")"


def _replace_type_check(types):
    op.execute("ALTER TABLE jobs_jobevent DROP CONSTRAINT IF EXISTS job_event_type_valid")
    op.execute(
        f"ALTER TABLE jobs_jobevent ADD CONSTRAINT job_event_type_valid CHECK ({_type_check(types)}) NOT VALID"
    )
    op.execute("ALTER TABLE jobs_jobevent VALIDATE CONSTRAINT job_event_type_valid")


def upgrade():
    op.create_table(
        "jobs_worker",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("threads", sa.Integer, nullable=False),
        sa.Column("busy", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("jobs_done", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.String(64), nullable=False, server_default=sa.text("''")),
        sa.Column("interval_seconds", sa.Float, nullable=False),
        sa.Column("job_types", postgresql.ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'")),
    )
    op.create_index("jobs_worker_last_seen_idx", "jobs_worker", ["last_seen"])
    _replace_type_check(NEW_TYPES)
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    if rows.scalar() < CONCURRENT_FROM_ROWS:
        op.execute(
            f"CREATE INDEX IF NOT EXISTS job_failed_error_fts_idx ON jobs_job USING gin ({FTS}) "
            "WHERE status = 'failed'"
        )
        return
    with op.get_context().autocommit_block():
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_failed_error_fts_idx ON jobs_job USING gin ({FTS}) "
            "WHERE status = 'failed'"
        )


def downgrade():
    op.execute("DROP INDEX IF EXISTS job_failed_error_fts_idx")
    op.execute("DELETE FROM jobs_jobevent WHERE type IN ('cancelled', 'rescheduled')")
    _replace_type_check(OLD_TYPES)
    op.drop_table("jobs_worker")
