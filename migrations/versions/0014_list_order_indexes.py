"""Indexes in the lists' whole order, (created_at, id).

- ``jobs_job_created_at_idx`` becomes (created_at, id). Every job list is newest first by
  (created_at, id), and jobs created by one statement or transaction (a bulk create, a
  schedule's catch-up) share one ``created_at``: a page inside such a group (the API's
  ``offset``, a keyset page of the dashboard) sorted the whole group by id before it could
  skip or stop, 500,000 rows for a bulk of 500,000. With the id in the index a page reads its
  rows in order and stops at its last. It keeps the reference's name: the new one is built
  under :data:`BUILDING`, the old one dropped, the new one renamed.
- ``job_error_created_idx`` (created_at, id) ``WHERE last_error <> ''``: the jobs with an
  error, newest first, so that an error search for a word in many errors reads its newest
  matches in order and stops at its cap (a bitmap scan of ``job_error_fts_idx`` gives them in
  table order). Partial, as the search's GIN index is: a job that never failed has no entry.

``CONCURRENTLY`` on a table of :data:`CONCURRENT_FROM_ROWS` rows or more, so writers are not
blocked on a large table; plainly on a new or small one, as 0008 does. A run interrupted half
way leaves :data:`BUILDING` (invalid, if a concurrent build failed), which the next run drops
and builds again.

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
CREATED = "jobs_job_created_at_idx"
BUILDING = "jobs_job_created_at_building"
ERRORS = "job_error_created_idx"


def upgrade():
    _run(["created_at", "id"], errors=True)


def downgrade():
    _run(["created_at"], errors=False)


def _run(created_columns: list[str], *, errors: bool) -> None:
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    if rows.scalar() < CONCURRENT_FROM_ROWS:
        _change(created_columns, errors=errors, concurrently=False)
        return
    with op.get_context().autocommit_block():
        _change(created_columns, errors=errors, concurrently=True)


def _change(created_columns: list[str], *, errors: bool, concurrently: bool) -> None:
    options = {"table_name": "jobs_job", "postgresql_concurrently": concurrently}
    op.drop_index(BUILDING, if_exists=True, **options)
    op.create_index(BUILDING, "jobs_job", created_columns, postgresql_concurrently=concurrently)
    op.drop_index(CREATED, if_exists=True, **options)
    op.execute(f"ALTER INDEX {BUILDING} RENAME TO {CREATED}")
    if errors:
        op.create_index(
            ERRORS,
            "jobs_job",
            ["created_at", "id"],
            postgresql_where=sa.text("last_error <> ''"),
            postgresql_concurrently=concurrently,
            if_not_exists=True,
        )
    else:
        op.drop_index(ERRORS, if_exists=True, **options)
