"""Index jobs by type and status, newest first: the job list's type filter, with or without a
status, and the list of job types.

The ``type`` filter is a case-insensitive substring. It is resolved to the job types that
contain it (a skip scan of this index: one descent per distinct type), then read as
``type IN (...)`` through this index: one range per type, or per type and status. Without it,
a filtered page and its count tested every row: seconds at 10M jobs. Built CONCURRENTLY, so
writers are not blocked on a large table.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    with op.get_context().autocommit_block():
        op.create_index(
            "job_type_created_idx",
            "jobs_job",
            ["type", "status", sa.literal_column("created_at DESC"), sa.literal_column("id DESC")],
            postgresql_concurrently=True,
            if_not_exists=True,
        )


def downgrade():
    with op.get_context().autocommit_block():
        op.drop_index(
            "job_type_created_idx", table_name="jobs_job", postgresql_concurrently=True, if_exists=True
        )
