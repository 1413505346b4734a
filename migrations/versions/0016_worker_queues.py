"""The queues each worker process serves: ``jobs_worker.queues``.

``queues`` (nullable ``text[]``): the names a process was started with (``--queues`` /
``JOB_WORKER_QUEUES``), written by its heartbeat; ``NULL`` when it serves every queue, which is
also what a row written by older code reads as. The dashboard compares the live rows' queues
with the queues that have ready jobs, to say which queue no live worker serves.

Nullable, so no table rewrite; the table is small (one row per process start).

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("jobs_worker", sa.Column("queues", postgresql.ARRAY(sa.Text()), nullable=True))


def downgrade():
    op.drop_column("jobs_worker", "queues")
