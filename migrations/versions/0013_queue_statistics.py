"""Tell the planner that a job's queue is one of many.

The claim reads one queue's range of ``job_queue_claim_idx`` at a time (``queue = <the
queue>`` with the queue known only when the statement runs: a generic plan's parameter, or a
row of ``jobs_queue``). PostgreSQL estimates such a comparison as one over the column's
number of distinct values, which ANALYZE reads as 1 while every queued job is in one queue
(``default``, most often): the comparison then looks free, and the claim-ordered indexes
without the queue (``job_claim_idx``, ``jobs_job_available_at_idx``) look as good as the
queue's own range, a coin toss between plans, one of which walks every other queue's jobs
on each claim (docs/benchmarks.md). ``n_distinct = 100`` makes such a comparison select one
row in a hundred, so a per-queue read plans on a queue-leading index whatever the data. A
comparison with a known queue name still reads the column's most common values. It takes
effect at the table's next ANALYZE (autovacuum's, or the one this migration runs on a table
of fewer than :data:`ANALYZE_BELOW_ROWS` rows: a larger one is left to autovacuum rather than
held up here).

A catalog change only: no rewrite, no long lock.

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

QUEUE_DISTINCT = 100
ANALYZE_BELOW_ROWS = 1_000_000


def upgrade():
    op.execute(f"ALTER TABLE jobs_job ALTER COLUMN queue SET (n_distinct = {QUEUE_DISTINCT})")
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"), {"n": ANALYZE_BELOW_ROWS}
    )
    if rows.scalar() < ANALYZE_BELOW_ROWS:
        op.execute("ANALYZE jobs_job")


def downgrade():
    op.execute("ALTER TABLE jobs_job ALTER COLUMN queue RESET (n_distinct)")
