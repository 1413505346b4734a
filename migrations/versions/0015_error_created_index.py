"""The newest errors in the list's order: ``job_error_created_idx``.

An error search reads the newest errors first and tests each (``store/error_search.py``): a
word common among them gets its newest matches from a short read in the list's order, instead
of a bitmap of every match from the GIN. The index holds (created_at DESC, id DESC) of the jobs
whose ``last_error`` is not empty, the predicate of job_error_fts_idx: jobs that never failed
(creates, claims, successes: the drain) have no entry.

``CONCURRENTLY`` on a table of :data:`CONCURRENT_FROM_ROWS` rows or more, so writers are not
blocked on a large table; plainly on a new or small one, as 0014 does. A run interrupted half
way leaves an index that may be invalid, which the next run drops and builds again.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

CONCURRENT_FROM_ROWS = 10_000
NAME = "job_error_created_idx"


def upgrade():
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    if rows.scalar() < CONCURRENT_FROM_ROWS:
        _build(concurrently=False)
        return
    with op.get_context().autocommit_block():
        _build(concurrently=True)


def downgrade():
    op.drop_index(NAME, table_name="jobs_job", if_exists=True)


def _build(*, concurrently: bool) -> None:
    op.drop_index(NAME, table_name="jobs_job", if_exists=True, postgresql_concurrently=concurrently)
    op.create_index(
        NAME,
        "jobs_job",
        [sa.text("created_at DESC"), sa.text("id DESC")],
        postgresql_where=sa.text("last_error <> ''"),
        postgresql_concurrently=concurrently,
    )
