"""The list order's index holds the whole order: ``jobs_job_created_at_idx`` on (created_at, id).

Every job list is newest first by (created_at, id). The index held ``created_at`` alone, and
jobs created by one statement or transaction (a bulk create, a schedule's catch-up) share one
``created_at``: a page inside such a group (the API's ``offset``, a keyset page of the
dashboard) sorted the whole group by id before it could skip or stop, 500,000 rows for a bulk
of 500,000. With the id in the index a page reads its rows in order and stops at its last.

The index keeps the reference's name: the new one is built under :data:`BUILDING`, the old
one dropped, the new one renamed. ``CONCURRENTLY`` on a table of :data:`CONCURRENT_FROM_ROWS`
rows or more, so writers are not blocked on a large table; plainly on a new or small one, as
0008 does. A run interrupted half way leaves :data:`BUILDING` (invalid, if a concurrent build
failed), which the next run drops and builds again.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

CONCURRENT_FROM_ROWS = 10_000
NAME = "jobs_job_created_at_idx"
BUILDING = "jobs_job_created_at_building"


def upgrade():
    _rebuild(["created_at", "id"])


def downgrade():
    _rebuild(["created_at"])


def _rebuild(columns: list[str]) -> None:
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    if rows.scalar() < CONCURRENT_FROM_ROWS:
        _swap(columns, concurrently=False)
        return
    with op.get_context().autocommit_block():
        _swap(columns, concurrently=True)


def _swap(columns: list[str], *, concurrently: bool) -> None:
    options = {"table_name": "jobs_job", "postgresql_concurrently": concurrently}
    op.drop_index(BUILDING, if_exists=True, **options)
    op.create_index(BUILDING, "jobs_job", columns, postgresql_concurrently=concurrently)
    op.drop_index(NAME, if_exists=True, **options)
    op.execute(f"ALTER INDEX {BUILDING} RENAME TO {NAME}")
