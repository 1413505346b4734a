"""jobs_finished_counts: succeeded and failed totals, refreshed in the background.

Counting finished jobs means reading every finished row (about 1 s at 3M rows); a polled
dashboard must not do that every few seconds. This one-row materialized view holds the two
totals and when they were counted; ``read.stats`` refreshes it concurrently (readers are never
blocked) when it is older than ``STATS_REFRESH_SECONDS`` and the table is large. Live figures
(queued, running, overdue) stay exact through the partial indexes. Nothing writes to it on a
job transition, so it is never a hot row.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    op.execute(
        """
        CREATE MATERIALIZED VIEW jobs_finished_counts AS
        SELECT 1 AS one,
               count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
               count(*) FILTER (WHERE status = 'failed') AS failed,
               now() AS counted_at
        FROM jobs_job WHERE status IN ('succeeded', 'failed')
        """
    )
    # REFRESH ... CONCURRENTLY needs a unique index.
    op.execute("CREATE UNIQUE INDEX jobs_finished_counts_one ON jobs_finished_counts (one)")


def downgrade():
    op.execute("DROP MATERIALIZED VIEW jobs_finished_counts")
