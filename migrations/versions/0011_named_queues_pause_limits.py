"""Named queues: the ``queue`` column, the per-queue claim index, queue settings and limit slots.

- ``jobs_job.queue varchar(64) NOT NULL DEFAULT 'default'``: a constant default, so PostgreSQL
  (11+) records it in the catalogue and rewrites no row; the ALTER holds its lock for a moment.
  Every existing job is then in ``default``, the reference's single logical queue.
- ``job_queue_claim_idx`` ``(queue, priority DESC, available_at, created_at, id) WHERE status =
  'queued'``: each queue's own range in claim order, so a claim for a quiet queue never walks
  another queue's backlog (``claim.sql``). ``job_claim_idx`` stays, for the reads in claim order
  across every queue (next to run, the metrics, "ahead of this job").
- ``job_queue_created_idx`` ``(queue, status, created_at DESC, id DESC) WHERE queue <>
  'default'``: the lists' queue filter, newest first. Partial: jobs of the default queue have
  no entry, so a deployment that never names a queue pays nothing for it on any write.
- ``job_queued_queue_idx`` ``(queue, least(attempts, 1), available_at) WHERE status = 'queued'``:
  each queue's ready / scheduled / retrying counts and oldest ready job as bounded ranges, as
  ``job_queued_idx`` gives them for every queue together (the Queues page, ``/api/queues/``).
- ``jobs_queue``: one row per queue that has had a job or a setting: paused (by whom, when), the
  concurrency limit, the rate limit, who changed them last and when. ``default`` is added.
- ``jobs_queue_slot`` ``(queue, n, job_id, attempt)``: N rows for a concurrency limit of N,
  each free or held by one running attempt (``job_queue_slot_job_unique``: a job holds one at
  most). ``jobs_queue_rate`` ``(queue, n, taken_at)``: ``count`` rows for a rate limit, each the
  time of the claim that last took it.

Indexes on ``jobs_job`` are built CONCURRENTLY on a table of :data:`CONCURRENT_FROM_ROWS` rows or
more, as 0008 does; every statement runs in its own short transaction (autocommit block).

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

CONCURRENT_FROM_ROWS = 10_000
NEW_INDEXES = (
    ("job_queue_claim_idx", "(queue, priority DESC, available_at, created_at, id)", "status = 'queued'"),
    ("job_queue_created_idx", "(queue, status, created_at DESC, id DESC)", "queue <> 'default'"),
    ("job_queued_queue_idx", "(queue, least(attempts, 1), available_at)", "status = 'queued'"),
)
TABLES = (
    """
    CREATE TABLE IF NOT EXISTS jobs_queue (
        name varchar(64) PRIMARY KEY,
        paused boolean NOT NULL DEFAULT false,
        paused_at timestamptz,
        paused_by varchar(255) NOT NULL DEFAULT '',
        concurrency_limit integer CHECK (concurrency_limit IS NULL OR concurrency_limit >= 1),
        rate_count integer CHECK (rate_count IS NULL OR rate_count >= 1),
        rate_period_seconds double precision
            CHECK (rate_period_seconds IS NULL OR rate_period_seconds > 0),
        changed_at timestamptz,
        changed_by varchar(255) NOT NULL DEFAULT '',
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT queue_rate_limit_whole CHECK ((rate_count IS NULL) = (rate_period_seconds IS NULL))
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS jobs_queue_slot (
        queue varchar(64) NOT NULL REFERENCES jobs_queue (name) ON DELETE CASCADE,
        n integer NOT NULL,
        job_id uuid,
        attempt integer,
        PRIMARY KEY (queue, n),
        CONSTRAINT queue_slot_shape CHECK ((job_id IS NULL) = (attempt IS NULL))
    )
    """,
    "CREATE UNIQUE INDEX IF NOT EXISTS job_queue_slot_job_unique ON jobs_queue_slot (job_id) "
    "WHERE job_id IS NOT NULL",
    """
    CREATE TABLE IF NOT EXISTS jobs_queue_rate (
        queue varchar(64) NOT NULL REFERENCES jobs_queue (name) ON DELETE CASCADE,
        n integer NOT NULL,
        taken_at timestamptz NOT NULL DEFAULT '-infinity',
        PRIMARY KEY (queue, n)
    )
    """,
    "INSERT INTO jobs_queue (name) VALUES ('default') ON CONFLICT DO NOTHING",
)


def _large() -> bool:
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    return rows.scalar() >= CONCURRENT_FROM_ROWS


def upgrade():
    concurrently = "CONCURRENTLY " if _large() else ""
    with op.get_context().autocommit_block():
        op.execute(
            "ALTER TABLE jobs_job ADD COLUMN IF NOT EXISTS queue varchar(64) NOT NULL DEFAULT 'default'"
        )
        for statement in TABLES:
            op.execute(statement)
        for name, columns, where in NEW_INDEXES:
            op.execute(f"CREATE INDEX {concurrently}IF NOT EXISTS {name} ON jobs_job {columns} WHERE {where}")


def downgrade():
    with op.get_context().autocommit_block():
        for name, _columns, _where in reversed(NEW_INDEXES):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS jobs_queue_rate")
    op.execute("DROP TABLE IF EXISTS jobs_queue_slot")
    op.execute("DROP TABLE IF EXISTS jobs_queue")
    op.execute("ALTER TABLE jobs_job DROP COLUMN IF EXISTS queue")
