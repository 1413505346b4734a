"""Index finished jobs by status and finish time: retention deletes the oldest first.

Pruning (``queue.retention``) takes, per batch, the ~1,000 oldest succeeded (or failed) jobs
finished before the cutoff: a range at the start of this index instead of a scan of every
finished row. Partial, so queued and running rows (the hot ones) are not in it. Built
CONCURRENTLY on a large table, so writers are not blocked; plainly on a new or small one, as
0004 does (a first start waits for no other session).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


CONCURRENT_FROM_ROWS = 10_000
WHERE = "status IN ('succeeded', 'failed')"


def upgrade():
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    if rows.scalar() < CONCURRENT_FROM_ROWS:
        op.create_index(
            "job_finished_idx",
            "jobs_job",
            ["status", "finished_at"],
            postgresql_where=WHERE,
            if_not_exists=True,
        )
        return
    with op.get_context().autocommit_block():
        op.create_index(
            "job_finished_idx",
            "jobs_job",
            ["status", "finished_at"],
            postgresql_where=WHERE,
            postgresql_concurrently=True,
            if_not_exists=True,
        )


def downgrade():
    with op.get_context().autocommit_block():
        op.drop_index("job_finished_idx", table_name="jobs_job", postgresql_concurrently=True, if_exists=True)
