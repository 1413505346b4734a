"""The oldest queued job in one read: ``job_oldest_queued_idx``.

The stats' ``oldest_queued_at`` (``/api/jobs/stats/``) took each job type's oldest queued job
from job_type_created_idx, one descent per type. During a drain the planner's statistics say
most of a type's rows are queued, and it took the list order's index (created_at, id) instead,
filtering on type and status: the succeeded jobs are the oldest, so it walked every one of them
before the first queued job (1.8 s with 300,000 of a million-job backlog drained), and the stats
answered 503 past the query limit. The index holds ``created_at`` of the queued jobs only, so
the oldest is its first live entry, whatever the statistics say.

Its predicate also says ``max_attempts >= 1``, which every row meets (job_attempts_valid) and
only that statement writes: no other statement can use the index. A list of queued jobs
filtered by type or queue, newest first, would otherwise be planned on it with a filter and
walk every queued job of the other types (a million during a backlog), where
job_type_created_idx or the list order's index answer in a few rows.

A job enters it when it is created or put back in the queue (a retry, a rescue, a release); a
claim, a settle or a cancel writes the row's new version without an entry here (the predicate
is false), so the drain's own statements never write to it.

``CONCURRENTLY`` on a table of :data:`CONCURRENT_FROM_ROWS` rows or more, so writers are not
blocked on a large table; plainly on a new or small one, as 0015 does. A run interrupted half
way leaves an index that may be invalid, which the next run drops and builds again.

Revision ID: 0022
Revises: 0021
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

CONCURRENT_FROM_ROWS = 10_000
NAME = "job_oldest_queued_idx"


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
        ["created_at"],
        postgresql_where=sa.text("status = 'queued' AND max_attempts >= 1"),
        postgresql_concurrently=concurrently,
    )
