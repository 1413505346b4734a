"""Recurring jobs: the ``jobs_schedule`` table, and the index that finds a schedule's runs.

- ``jobs_schedule``: one row per schedule declared in code (``runtime/schedules.py``): its
  definition as the workers last declared it, and its runtime state (paused, by whom, retired,
  next run, last run and its job, fired and skipped counters). ``schedule_due_idx`` on
  ``next_run_at`` of the active rows: the workers' due check.
- ``job_schedule_key_idx`` on ``jobs_job (idempotency_key text_pattern_ops)`` WHERE
  ``idempotency_key LIKE 'schedule:%'``: a schedule's runs are keyed ``schedule:{name}:...``,
  and their prefix is one range of this index (``~>=~`` / ``~<~``, byte order) in any database
  collation (the database's own may not order ':' and ';' by their bytes). Partial: jobs that are not runs of
  a schedule, the whole drain of ordinary jobs, have no entry. Built CONCURRENTLY on a table
  of :data:`CONCURRENT_FROM_ROWS` rows or more, as 0008 and 0010 do.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

CONCURRENT_FROM_ROWS = 10_000


def _large() -> bool:
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    return rows.scalar() >= CONCURRENT_FROM_ROWS


def upgrade():
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS jobs_schedule (
            name varchar(64) PRIMARY KEY,
            cron varchar(255) NOT NULL,
            timezone varchar(64) NOT NULL,
            job_type varchar(120) NOT NULL,
            payload jsonb NOT NULL DEFAULT '{}'::jsonb,
            queue varchar(64) NOT NULL DEFAULT 'default',
            priority smallint NOT NULL DEFAULT 50,
            max_attempts integer NOT NULL DEFAULT 3,
            missed varchar(8) NOT NULL DEFAULT 'latest',
            paused boolean NOT NULL DEFAULT false,
            paused_by varchar(255),
            paused_at timestamptz,
            retired_at timestamptz,
            next_run_at timestamptz,
            last_run_at timestamptz,
            last_fired_at timestamptz,
            last_job_id uuid,
            fired_count bigint NOT NULL DEFAULT 0,
            skipped_count bigint NOT NULL DEFAULT 0,
            declared_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            CONSTRAINT schedule_missed_valid CHECK (missed IN ('latest', 'all'))
        )
        """
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS schedule_due_idx ON jobs_schedule (next_run_at) "
        "WHERE NOT paused AND retired_at IS NULL"
    )
    concurrently = "CONCURRENTLY " if _large() else ""
    with op.get_context().autocommit_block():
        op.execute(
            f"CREATE INDEX {concurrently}IF NOT EXISTS job_schedule_key_idx ON jobs_job "
            "(idempotency_key text_pattern_ops) WHERE idempotency_key LIKE 'schedule:%'"
        )


def downgrade():
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS job_schedule_key_idx")
    op.execute("DROP TABLE IF EXISTS jobs_schedule")
