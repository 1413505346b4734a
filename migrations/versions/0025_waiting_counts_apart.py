"""A waiting job's count of unsettled parents kept in a narrow table while it is above one.

Each settle of a parent that was not its dependent's last took one off the dependent's
``waiting_on``, which wrote the dependent's whole row again: in a fan-in, where each dependent
waits for up to 100 parents, a row of about 1,800 bytes (its ``depends_on`` alone 1,624, kept in
the row), written once per parent, with a new entry in every index of ``jobs_job`` whenever the
new version could not stay on its page. That write was most of what a batch-mode fan-in member
cost the database (docs/benchmarks.md). Now:

1. ``jobs_job_waiting (job_id, waiting_on)`` holds the count of a waiting job created with more
   than one parent to wait for (``create_dependent``, dependents.sql), one narrow row per job;
   ``jobs_job.waiting_on`` keeps the count the job's row was last written with.
2. A parent that is not the dependent's last takes one off that narrow row instead of the job's
   (fenced as before: the job still waits, and the parent succeeded or the job runs after any
   outcome); the job's row is only read.
3. Every path that decides about the job locks the narrow row first, then the job's (one lock
   order for all of them): the release trigger's own path (the last parent, a parent that
   failed), which folds the count back into the job's row and deletes the narrow one before
   going on as before; the cancel actions, which delete it.
4. Readers take the narrow row's count where there is one: :func:`jobs_waiting_on` (the job's
   id and its row's ``waiting_on``), one probe of its primary key for a job whose row says it
   waits for more than one parent.

What the trigger guarantees is unchanged: concurrent settles of one dependent's parents are
ordered by a row lock (the narrow row's, or the job's when there is none), the job is released
only while it still waits, under its row lock, exactly once. A dependent's ``updated_at`` now
moves when it is released or cancelled, not at each parent's settle.

Both ways, writes to ``jobs_job`` wait while it runs (a table lock that readers pass), so
that no settle running the old function takes one off a count that has already moved.
The downgrade folds every count back into its job's row and restores 0023's function.

Revision ID: 0025
Revises: 0024
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

TABLE = "jobs_job_waiting"

# The count a reader shows: the narrow row's, where the job's own says more than one.
READER = f"""
CREATE OR REPLACE FUNCTION jobs_waiting_on(job_id uuid, waiting_on integer)
RETURNS integer LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN $2 > 1
                THEN COALESCE((SELECT c.waiting_on FROM {TABLE} AS c WHERE c.job_id = $1), $2)
                ELSE $2 END
$$
"""

# Not its last parent: one off the narrow row, the job's row read and fenced as 0023 fenced it.
DECREMENT = (
    f"UPDATE {TABLE} AS c SET waiting_on = c.waiting_on - 1 FROM jobs_job AS w"
    " WHERE c.job_id = child_id AND c.waiting_on > 1 AND w.id = child_id AND w.status = 'queued'"
    " AND w.available_at = TIMESTAMPTZ '{waiting}' AND (p_ok OR w.on_parent_failure = 'run');\n"
    "            IF FOUND THEN changed := changed + 1; CONTINUE; END IF;\n            "
)

# Else the narrow row first (taken out, its count kept in `remaining` for a moment), then the
# job's row as 0021 locks it; the count goes back into the job's row, which the rest of 0021's
# function reads and writes.
FOLD = (
    f"DELETE FROM {TABLE} AS c WHERE c.job_id = child_id RETURNING c.waiting_on INTO remaining;\n"
    "            {lock}\n"
    "            IF FOUND AND remaining IS NOT NULL THEN\n"
    "                UPDATE jobs_job SET waiting_on = remaining WHERE id = child_id;\n"
    "                child.waiting_on := remaining;\n"
    "            END IF;"
)


def _edges() -> dict:
    """Migration 0023's names: its edge lookup, its function, and its reader of earlier files."""
    from pathlib import Path
    from runpy import run_path

    return run_path(str(Path(__file__).with_name("0023_dependency_edges.py")))


def release_function() -> str:
    """``jobs_release_dependents`` as this migration leaves it: 0023's edge lookup, then the
    narrow row's decrement, then 0021's lock with the count folded back."""
    edges = _edges()
    m = edges["_earlier"]("0021_release_by_key.py")
    lock = DECREMENT.replace("{waiting}", m.WAITING_AT) + FOLD.replace("{lock}", m.BY_KEY["lock"])
    return m._function(edges["LOOKUP"], lock)


# Settles wait while the counts move between the two tables and the function changes: a
# settle running the old function meanwhile would take one off a job's row after its count was
# copied. Readers are not stopped.
STOP_WRITES = "LOCK TABLE jobs_job IN SHARE ROW EXCLUSIVE MODE"


def upgrade():
    waiting_at = _edges()["_earlier"]("0021_release_by_key.py").WAITING_AT
    op.execute(STOP_WRITES)
    op.create_table(
        TABLE,
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("waiting_on", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name="jobs_job_waiting_pkey"),
        sa.CheckConstraint("waiting_on > 0", name="jobs_job_waiting_positive"),
    )
    op.execute(
        f"INSERT INTO {TABLE} (job_id, waiting_on) SELECT id, waiting_on FROM jobs_job"
        f" WHERE status = 'queued' AND available_at = TIMESTAMPTZ '{waiting_at}' AND waiting_on > 1"
    )
    op.execute(READER)
    op.execute(release_function())


def downgrade():
    """Every count back in its job's row, 0023's function, the table and reader gone."""
    op.execute(STOP_WRITES)
    op.execute(f"UPDATE jobs_job AS j SET waiting_on = c.waiting_on FROM {TABLE} AS c WHERE j.id = c.job_id")
    op.execute(_edges()["release_function"]())
    op.execute("DROP FUNCTION jobs_waiting_on(uuid, integer)")
    op.drop_table(TABLE)
