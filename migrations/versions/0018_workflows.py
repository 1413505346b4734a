"""Workflows: jobs that wait for other jobs, released by the transaction that settles the last.

Columns of ``jobs_job`` (each added without a table rewrite: nullable, or a constant default):

- ``depends_on`` (``uuid[]``, NULL for a job without parents): its parents, at most 100;
- ``on_parent_failure`` (``cancel`` | ``run`` | ``wait``; NULL without parents);
- ``workflow`` (up to 120 characters, NULL outside any): groups jobs for the pages and actions;
- ``waiting_on`` (integer, 0): how many parents it still waits for;
- ``has_dependents`` (boolean, false): some job names it as a parent; the release trigger
  fires only for such a job, so a job nobody waits for settles as before;
- ``not_before`` (NULL unless a waiting job was created with a later ``available_at``): the
  earliest time it may run once released.

A waiting job is ``queued`` with ``available_at`` = :data:`WAITING_AT` (9999-12-31 UTC, after
any instant a client may give): the claims' ``available_at <= now`` never picks it, so the
claim statements and their plans do not change. Release sets ``available_at`` to the release
time (or ``not_before``).

Release: ``jobs_job_release``, an ``AFTER UPDATE OF status`` row trigger, fires when a job with
dependents ends (``succeeded`` or ``failed``, cancels included), in the statement that settles
it. Its function walks the dependents (``job_depends_on_idx``), each locked ``FOR UPDATE``:

- a parent that succeeded, or failed under ``run``, takes one off ``waiting_on``; at zero the
  parents are counted again (a fresh snapshot after the lock: a parent settled by another
  transaction that committed meanwhile is seen) and the job is released when none is left,
  with a ``released`` event and a wake-up;
- a parent that failed under ``cancel`` cancels the dependent (``failed``, ``cancelled_at``,
  ``last_error`` naming the parent), and its own dependents follow in the same walk;
- under ``wait`` nothing changes: a retried parent that then succeeds releases it.

Exactly once: the dependent's row lock orders concurrent settles of its parents, and a job is
released only while it still waits (``available_at`` = WAITING_AT), under that lock. A create
that names a parent takes the parent's row lock first (``lock_parents`` in create.sql), so a
parent settling at the same moment either sees the new dependent or was seen settled by it.
The trigger does not fire for statements run by the function itself (``pg_trigger_depth``):
the walk cascades without recursion, whatever the depth of the graph.

Indexes, each only over the jobs it concerns (a job outside workflows has no entry):
``job_depends_on_idx`` (GIN over ``depends_on``: a parent's dependents), ``job_workflow_idx``
(``workflow``, ``status``: a workflow's jobs and its counts by status) and
``job_workflow_created_idx`` (``created_at DESC, id DESC``: the recent workflows).
``job_event_type_valid`` also allows ``released``.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

WAITING_AT = "9999-12-31 00:00:00+00"
EVENT_TYPES = (
    "created",
    "claimed",
    "progress",
    "lease_renewed",
    "succeeded",
    "retry_scheduled",
    "failed",
    "timeout_requeued",
    "manual_retry",
    "cancelled",
    "rescheduled",
)
NOTIFY_CHANNEL = "jobqueue_jobs"

RELEASE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION jobs_release_dependents(parent uuid, parent_ok boolean, at timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    todo uuid[] := ARRAY[parent];
    todo_ok boolean[] := ARRAY[parent_ok];
    i integer := 1;
    p uuid;
    p_ok boolean;
    child record;
    remaining integer;
    changed integer := 0;
BEGIN
    WHILE i <= cardinality(todo) LOOP
        p := todo[i];
        p_ok := todo_ok[i];
        i := i + 1;
        FOR child IN
            SELECT id, queue, attempts, depends_on, on_parent_failure, waiting_on, has_dependents,
                   not_before
            FROM jobs_job
            WHERE depends_on @> ARRAY[p] AND status = 'queued'
              AND available_at = TIMESTAMPTZ '{WAITING_AT}'
            ORDER BY id
            FOR UPDATE
        LOOP
            changed := changed + 1;
            IF NOT p_ok AND child.on_parent_failure = 'cancel' THEN
                UPDATE jobs_job
                SET status = 'failed', finished_at = at, cancelled_at = at, waiting_on = 0,
                    last_error = 'Cancelled: parent ' || p || ' failed', updated_at = at
                WHERE id = child.id;
                INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
                VALUES (child.id, 'cancelled', child.attempts, NULL,
                        'Cancelled: parent ' || p || ' failed',
                        jsonb_build_object('parent', p, 'source', 'workflow'), at);
                IF child.has_dependents THEN
                    todo := todo || child.id;
                    todo_ok := todo_ok || false;
                END IF;
            ELSIF p_ok OR child.on_parent_failure = 'run' THEN
                remaining := child.waiting_on - 1;
                IF remaining <= 0 THEN
                    SELECT count(*) INTO remaining FROM jobs_job AS q
                    WHERE q.id = ANY(child.depends_on) AND q.id <> p
                      AND CASE WHEN child.on_parent_failure = 'run'
                               THEN q.status IN ('queued', 'running')
                               ELSE q.status <> 'succeeded' END;
                END IF;
                IF remaining <= 0 THEN
                    UPDATE jobs_job
                    SET available_at = GREATEST(at, COALESCE(child.not_before, at)), waiting_on = 0,
                        not_before = NULL, updated_at = at
                    WHERE id = child.id;
                    INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
                    VALUES (child.id, 'released', child.attempts, NULL, 'Released: its parents are done',
                            jsonb_build_object('parent', p), at);
                    IF COALESCE(child.not_before, at) <= at THEN
                        PERFORM pg_notify('{NOTIFY_CHANNEL}', child.queue);
                    END IF;
                ELSE
                    UPDATE jobs_job SET waiting_on = remaining, updated_at = at WHERE id = child.id;
                END IF;
            END IF;
        END LOOP;
    END LOOP;
    RETURN changed;
END
$$
"""

TRIGGER_FUNCTION = """
CREATE OR REPLACE FUNCTION jobs_job_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM jobs_release_dependents(NEW.id, NEW.status = 'succeeded', NEW.updated_at);
    RETURN NULL;
END
$$
"""

TRIGGER = """
CREATE TRIGGER jobs_job_release AFTER UPDATE OF status ON jobs_job FOR EACH ROW
WHEN (NEW.has_dependents AND NEW.status IN ('succeeded', 'failed')
      AND OLD.status IS DISTINCT FROM NEW.status AND pg_trigger_depth() = 0)
EXECUTE FUNCTION jobs_job_ended()
"""


def _type_check(types: tuple[str, ...]) -> str:
    return "type IN (" + ", ".join(f"'{t}'" for t in types) + ")"


def _event_types(types: tuple[str, ...]) -> None:
    op.execute("ALTER TABLE jobs_jobevent DROP CONSTRAINT IF EXISTS job_event_type_valid")
    op.execute(
        f"ALTER TABLE jobs_jobevent ADD CONSTRAINT job_event_type_valid CHECK ({_type_check(types)}) NOT VALID"
    )
    op.execute("ALTER TABLE jobs_jobevent VALIDATE CONSTRAINT job_event_type_valid")


def create_depends_on_index() -> None:
    """``job_depends_on_idx``: GIN over ``depends_on``, only jobs with parents, fastupdate off
    (a lookup never walks a pending list). Migration 0023 drops it; its downgrade calls this."""
    op.create_index(
        "job_depends_on_idx",
        "jobs_job",
        ["depends_on"],
        postgresql_using="gin",
        postgresql_with={"fastupdate": "off"},
        postgresql_where=sa.text("depends_on IS NOT NULL"),
    )


def upgrade():
    op.add_column("jobs_job", sa.Column("depends_on", postgresql.ARRAY(sa.Uuid()), nullable=True))
    op.add_column("jobs_job", sa.Column("on_parent_failure", sa.String(8), nullable=True))
    op.add_column("jobs_job", sa.Column("workflow", sa.String(120), nullable=True))
    op.add_column(
        "jobs_job", sa.Column("waiting_on", sa.Integer(), server_default=sa.text("0"), nullable=False)
    )
    op.add_column(
        "jobs_job", sa.Column("has_dependents", sa.Boolean(), server_default=sa.text("false"), nullable=False)
    )
    op.add_column("jobs_job", sa.Column("not_before", sa.DateTime(timezone=True), nullable=True))
    op.create_check_constraint(
        "job_on_parent_failure_valid",
        "jobs_job",
        "on_parent_failure IS NULL OR on_parent_failure IN ('cancel', 'run', 'wait')",
    )
    create_depends_on_index()
    op.create_index(
        "job_workflow_idx",
        "jobs_job",
        ["workflow", "status"],
        postgresql_where=sa.text("workflow IS NOT NULL"),
    )
    op.create_index(
        "job_workflow_created_idx",
        "jobs_job",
        [sa.text("created_at DESC"), sa.text("id DESC")],
        postgresql_where=sa.text("workflow IS NOT NULL"),
    )
    _event_types((*EVENT_TYPES, "released"))
    op.execute(RELEASE_FUNCTION)
    op.execute(TRIGGER_FUNCTION)
    op.execute(TRIGGER)


def downgrade():
    op.execute("DROP TRIGGER IF EXISTS jobs_job_release ON jobs_job")
    op.execute("DROP FUNCTION IF EXISTS jobs_job_ended()")
    op.execute("DROP FUNCTION IF EXISTS jobs_release_dependents(uuid, boolean, timestamptz)")
    op.execute("DELETE FROM jobs_jobevent WHERE type = 'released'")
    _event_types(EVENT_TYPES)
    op.drop_index("job_workflow_created_idx", table_name="jobs_job")
    op.drop_index("job_workflow_idx", table_name="jobs_job")
    op.drop_index("job_depends_on_idx", table_name="jobs_job")
    op.drop_constraint("job_on_parent_failure_valid", "jobs_job", type_="check")
    for column in (
        "not_before",
        "has_dependents",
        "waiting_on",
        "workflow",
        "on_parent_failure",
        "depends_on",
    ):
        op.drop_column("jobs_job", column)
