"""Indexes for the overview's live figures, so each stays bounded whatever the backlog.

- ``job_queued_idx`` ``(least(attempts, 1), available_at) WHERE status = 'queued'``: ready
  (due now, first run or retry), scheduled (not due, never run) and retrying (not due, backing
  off after a failure) are three ranges of it, each counted up to a cap, and the oldest ready
  job's ``available_at`` is the first entry of the two "due" ranges.
- ``job_queued_type_idx`` ``(type, least(attempts, 1), available_at) WHERE status = 'queued'``:
  the same per job type (the overview's per-type table).
- ``job_failed_type_idx`` ``(type, finished_at) WHERE status = 'failed'``: failed in the last
  24 hours, per type.

Partial indexes: only queued (or failed) rows, so they stay small while finished rows pile
up. Built CONCURRENTLY on a table of :data:`CONCURRENT_FROM_ROWS` rows or more, so writers are
not blocked on a large table; plainly on a new or small one, as 0004 and 0006 do (a first start
or the tests wait for no other session's transaction).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

CONCURRENT_FROM_ROWS = 10_000
INDEXES = (
    ("job_queued_idx", [sa.text("least(attempts, 1)"), "available_at"], "status = 'queued'"),
    ("job_queued_type_idx", ["type", sa.text("least(attempts, 1)"), "available_at"], "status = 'queued'"),
    ("job_failed_type_idx", ["type", "finished_at"], "status = 'failed'"),
)


def upgrade():
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    if rows.scalar() < CONCURRENT_FROM_ROWS:
        _create(concurrently=False)
        return
    with op.get_context().autocommit_block():
        _create(concurrently=True)


def _create(*, concurrently: bool) -> None:
    for name, columns, where in INDEXES:
        op.create_index(
            name,
            "jobs_job",
            columns,
            postgresql_where=sa.text(where),
            postgresql_concurrently=concurrently,
            if_not_exists=True,
        )


def downgrade():
    with op.get_context().autocommit_block():
        for name, _columns, _where in reversed(INDEXES):
            op.drop_index(name, table_name="jobs_job", postgresql_concurrently=True, if_exists=True)
