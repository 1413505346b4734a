"""Index jobs by type and status, newest first: the job list's type filter, with or without a
status, and the list of job types.

The ``type`` filter is a case-insensitive substring. It is resolved to the job types that
contain it (a skip scan of this index: one descent per distinct type), then read as
``type IN (...)`` through this index: one range per type, or per type and status. Without it,
a filtered page and its count tested every row: seconds at 10M jobs. Built CONCURRENTLY on a
table of :data:`CONCURRENT_FROM_ROWS` rows or more, so writers are not blocked on a large table;
on a new or small table (a first start, the tests) a plain CREATE INDEX inside the migration's
transaction takes milliseconds and waits for no other session's transaction.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


CONCURRENT_FROM_ROWS = 10_000
COLUMNS = ["type", "status", sa.literal_column("created_at DESC"), sa.literal_column("id DESC")]


def upgrade():
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    if rows.scalar() < CONCURRENT_FROM_ROWS:
        op.create_index("job_type_created_idx", "jobs_job", COLUMNS, if_not_exists=True)
        return
    with op.get_context().autocommit_block():
        op.create_index(
            "job_type_created_idx",
            "jobs_job",
            COLUMNS,
            postgresql_concurrently=True,
            if_not_exists=True,
        )


def downgrade():
    with op.get_context().autocommit_block():
        op.drop_index(
            "job_type_created_idx", table_name="jobs_job", postgresql_concurrently=True, if_exists=True
        )
