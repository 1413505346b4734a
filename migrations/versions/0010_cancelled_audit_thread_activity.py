"""Cancelled jobs told apart from failed ones, an audit log, and what each worker thread runs.

- ``jobs_job.cancelled_at`` (nullable): set when an operator cancels a queued job (which makes
  it ``failed``, the reference's four states unchanged) and cleared by a retry; so a cancel is
  never counted, listed or alerted on as a failure. ``job_cancelled_shape`` keeps it on failed
  jobs only (added NOT VALID, then validated: the scan does not block writers). Jobs
  cancelled before this revision get it from their ``cancelled`` event.
- ``job_cancelled_idx`` ``(created_at DESC, id DESC) WHERE cancelled_at IS NOT NULL``: the
  cancelled list, newest first, and its count; empty until an operator cancels.
- ``job_failure_type_idx`` ``(type, finished_at) WHERE status = 'failed' AND cancelled_at IS
  NULL`` replaces ``job_failed_type_idx``: failures of the last 24 hours per type, cancels left
  out, still an index range.
- ``jobs_finished_counts`` gains ``cancelled``, and its ``failed`` leaves them out. The new view
  is built beside the old one (a scan of the finished rows, readers keep the old figures), then
  swapped in by a rename.
- ``jobs_audit``: who deleted which finished job (its events go with it) and who removed which
  worker row; newest first by id, and by job id.
- ``jobs_worker.activity`` (nullable jsonb): each thread of the process, idle or running an
  attempt (job, attempt, since when, its lease), as the heartbeat last saw it.
- ``ANALYZE jobs_job (cancelled_at)``: the planner's statistics of the new column, so the
  cancelled filters are planned on the real (tiny) share of cancelled jobs.

Every column added is nullable (no table rewrite); the ALTERs run in their own short
transactions, not inside the long ones. Indexes are built CONCURRENTLY on a table of
:data:`CONCURRENT_FROM_ROWS` rows or more, as 0008 does.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

CONCURRENT_FROM_ROWS = 10_000
NEW_INDEXES = (
    ("job_cancelled_idx", "(created_at DESC, id DESC)", "cancelled_at IS NOT NULL"),
    ("job_failure_type_idx", "(type, finished_at)", "status = 'failed' AND cancelled_at IS NULL"),
)
COUNTS = """
    SELECT 1 AS one,
           count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE status = 'failed'{failed}) AS failed,
           {cancelled}
           now() AS counted_at
    FROM jobs_job WHERE status IN ('succeeded', 'failed')
"""
NEW_COUNTS = COUNTS.format(
    failed=" AND cancelled_at IS NULL",
    cancelled="count(*) FILTER (WHERE status = 'failed' AND cancelled_at IS NOT NULL) AS cancelled,",
)
OLD_COUNTS = COUNTS.format(failed="", cancelled="")
BACKFILL = """
    UPDATE jobs_job AS j SET cancelled_at = c.created_at
    FROM (SELECT DISTINCT ON (job_id) job_id, attempt, created_at FROM jobs_jobevent
          WHERE type = 'cancelled' ORDER BY job_id, id DESC) AS c
    WHERE j.id = c.job_id AND j.status = 'failed' AND j.attempts = c.attempt
      AND j.cancelled_at IS NULL AND j.last_error LIKE 'Cancelled by %'
"""


def _large() -> bool:
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    return rows.scalar() >= CONCURRENT_FROM_ROWS


def _swap_counts(definition: str) -> None:
    op.execute("DROP MATERIALIZED VIEW IF EXISTS jobs_finished_counts_next")
    op.execute(f"CREATE MATERIALIZED VIEW jobs_finished_counts_next AS {definition}")
    op.execute("CREATE UNIQUE INDEX jobs_finished_counts_next_one ON jobs_finished_counts_next (one)")


def _rename_counts() -> None:
    op.execute("DROP MATERIALIZED VIEW jobs_finished_counts")
    op.execute("ALTER MATERIALIZED VIEW jobs_finished_counts_next RENAME TO jobs_finished_counts")
    op.execute("ALTER INDEX jobs_finished_counts_next_one RENAME TO jobs_finished_counts_one")


def upgrade():
    concurrently = "CONCURRENTLY " if _large() else ""
    with op.get_context().autocommit_block():
        op.execute("ALTER TABLE jobs_job ADD COLUMN IF NOT EXISTS cancelled_at timestamptz")
        op.execute("ALTER TABLE jobs_worker ADD COLUMN IF NOT EXISTS activity jsonb")
        op.execute("ALTER TABLE jobs_job DROP CONSTRAINT IF EXISTS job_cancelled_shape")
        op.execute(
            "ALTER TABLE jobs_job ADD CONSTRAINT job_cancelled_shape "
            "CHECK (cancelled_at IS NULL OR status = 'failed') NOT VALID"
        )
        op.execute(BACKFILL)
        op.execute("ALTER TABLE jobs_job VALIDATE CONSTRAINT job_cancelled_shape")
        # The planner's statistics of the new column (a sample of the table; writers go on):
        # without them it takes "cancelled_at IS NOT NULL" for most rows, and a cancelled list
        # walks the whole created_at index instead of the tiny job_cancelled_idx.
        op.execute("ANALYZE jobs_job (cancelled_at)")
        op.execute(
            """
            CREATE TABLE IF NOT EXISTS jobs_audit (
                id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                created_at timestamptz NOT NULL,
                action varchar(32) NOT NULL,
                actor varchar(255) NOT NULL DEFAULT '',
                job_id uuid,
                job_type varchar(120),
                job_status varchar(16),
                worker_id varchar(255),
                data jsonb NOT NULL DEFAULT '{}'::jsonb
            )
            """
        )
        op.execute(
            "CREATE INDEX IF NOT EXISTS jobs_audit_job_idx ON jobs_audit (job_id) WHERE job_id IS NOT NULL"
        )
        for name, columns, where in NEW_INDEXES:
            op.execute(f"CREATE INDEX {concurrently}IF NOT EXISTS {name} ON jobs_job {columns} WHERE {where}")
        op.execute(f"DROP INDEX {concurrently}IF EXISTS job_failed_type_idx")
        _swap_counts(NEW_COUNTS)
    _rename_counts()


def downgrade():
    with op.get_context().autocommit_block():
        op.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_failed_type_idx ON jobs_job (type, finished_at) "
            "WHERE status = 'failed'"
        )
        for name, _columns, _where in reversed(NEW_INDEXES):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        _swap_counts(OLD_COUNTS)
    _rename_counts()
    op.execute("DROP TABLE IF EXISTS jobs_audit")
    op.execute("ALTER TABLE jobs_job DROP CONSTRAINT IF EXISTS job_cancelled_shape")
    op.execute("ALTER TABLE jobs_job DROP COLUMN IF EXISTS cancelled_at")
    op.execute("ALTER TABLE jobs_worker DROP COLUMN IF EXISTS activity")
