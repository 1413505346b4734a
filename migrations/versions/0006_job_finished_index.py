"""Index finished jobs by status and finish time: retention deletes the oldest first.

Pruning (``queue.retention``) takes, per batch, the ~1,000 oldest succeeded (or failed) jobs
finished before the cutoff: a range at the start of this index instead of a scan of every
finished row. Partial, so queued and running rows (the hot ones) are not in it. Built
CONCURRENTLY, so writers are not blocked on a large table. Numbered 0006 (issue 19); it
revises 0004 on its branch: merged after a 0005, it revises that one instead.

Revision ID: 0006
Revises: 0004
"""

from alembic import op

revision = "0006"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    with op.get_context().autocommit_block():
        op.create_index(
            "job_finished_idx",
            "jobs_job",
            ["status", "finished_at"],
            postgresql_where="status IN ('succeeded', 'failed')",
            postgresql_concurrently=True,
            if_not_exists=True,
        )


def downgrade():
    with op.get_context().autocommit_block():
        op.drop_index("job_finished_idx", table_name="jobs_job", postgresql_concurrently=True, if_exists=True)
