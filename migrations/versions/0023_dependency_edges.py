"""A parent's dependents from a narrow table, ``jobs_job_dependency``; the GIN index goes.

Each settle of a job with dependents ran the release trigger, which found the dependents
through ``job_depends_on_idx`` (GIN over ``depends_on``) and then, for every parent but the
last, locked the dependent and wrote it again with ``waiting_on - 1``. In a fan-in, where each
dependent waits for 100 parents, that cost about 230 µs of server time per settled parent
(docs/benchmarks.md): the GIN lookup visits every version of the dependent its earlier
decrements left behind and rechecks each one's 100-element array, and each decrement that
could not stay on its page (always, after the first few, within one batch's transaction)
inserted the dependent's 100 parents into the GIN index again.

Now:

1. ``jobs_job_dependency (parent_id, child_id)``, one row per edge, written with the dependent
   in its create statement and never updated, answers "the dependents of this parent" by its
   primary key. It is filled here from every job's ``depends_on``.
2. ``job_depends_on_idx`` is dropped: its three readers (the trigger, the job page's
   dependents, retention's guard for a failed parent) read the table instead, and a
   dependent's new version no longer writes 100 GIN entries.
3. A parent that is not the dependent's last takes it in one fenced ``UPDATE`` that
   decrements ``waiting_on`` while it is above 1 (the row lock re-reads the newest version, so
   concurrent settles of its parents each take one off and none takes the last); only the last
   parent, or one that fails under ``cancel``, locks and reads the dependent as before.

An edge's row goes when its parent is deleted (retention, the delete action); an edge whose
dependent is gone names no job and is skipped by every reader. ``depends_on`` stays the
dependent's own list of its parents (the job page, the release's final count, a retry).

What the trigger guarantees is as in 0018 and 0021: concurrent settles of one dependent's
parents are ordered by its row lock, it is released only while it still waits, under that
lock, exactly once; a create that names a parent takes the parent's lock first, so its edges
are committed before that parent's settle looks for them.

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

WAITING_AT = "9999-12-31 00:00:00+00"
NOTIFY_CHANNEL = "jobqueue_jobs"
TABLE = "jobs_job_dependency"

RELEASE_FUNCTION = """
CREATE OR REPLACE FUNCTION jobs_release_dependents(parent uuid, parent_ok boolean, at timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    todo uuid[] := ARRAY[parent];
    todo_ok boolean[] := ARRAY[parent_ok];
    i integer := 1;
    p uuid;
    p_ok boolean;
    found_ids uuid[];
    child_id uuid;
    child record;
    remaining integer;
    changed integer := 0;
BEGIN
    WHILE i <= cardinality(todo) LOOP
        p := todo[i];
        p_ok := todo_ok[i];
        i := i + 1;
        SELECT array_agg(d.child_id ORDER BY d.child_id) INTO found_ids
        FROM jobs_job_dependency AS d WHERE d.parent_id = p;
        CONTINUE WHEN found_ids IS NULL;
        FOREACH child_id IN ARRAY found_ids LOOP
            -- Not its last parent: one off, in one statement (the lock re-reads the newest
            -- version, so waiting_on > 1 holds for the version it writes).
            UPDATE jobs_job AS w SET waiting_on = w.waiting_on - 1, updated_at = at
            WHERE w.id = child_id AND w.status = 'queued'
              AND w.available_at = TIMESTAMPTZ '{waiting}' AND w.waiting_on > 1
              AND (p_ok OR w.on_parent_failure = 'run');
            IF FOUND THEN
                changed := changed + 1;
                CONTINUE;
            END IF;
            SELECT id, queue, attempts, depends_on, on_parent_failure, waiting_on, has_dependents,
                   not_before
            INTO child FROM jobs_job
            WHERE id = child_id AND status = 'queued' AND available_at = TIMESTAMPTZ '{waiting}'
            FOR UPDATE;
            CONTINUE WHEN NOT FOUND;
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
                        PERFORM pg_notify('{channel}', child.queue);
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
""".replace("{waiting}", WAITING_AT).replace("{channel}", NOTIFY_CHANNEL)


def upgrade():
    op.create_table(
        TABLE,
        sa.Column("parent_id", sa.Uuid(), nullable=False),
        sa.Column("child_id", sa.Uuid(), nullable=False),
        sa.PrimaryKeyConstraint("parent_id", "child_id", name="jobs_job_dependency_pkey"),
    )
    op.execute(
        f"INSERT INTO {TABLE} (parent_id, child_id)"
        " SELECT DISTINCT p, j.id FROM jobs_job AS j CROSS JOIN LATERAL unnest(j.depends_on) AS p"
        " WHERE j.depends_on IS NOT NULL"
    )
    op.execute(RELEASE_FUNCTION)
    op.drop_index("job_depends_on_idx", table_name="jobs_job")


def downgrade():
    """Back to 0021's function (read from that migration's file) and the GIN index."""
    from importlib.util import module_from_spec, spec_from_file_location
    from pathlib import Path

    spec = spec_from_file_location("release_0021", Path(__file__).with_name("0021_release_by_key.py"))
    assert spec is not None and spec.loader is not None
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    op.create_index(
        "job_depends_on_idx",
        "jobs_job",
        ["depends_on"],
        postgresql_using="gin",
        postgresql_with={"fastupdate": "off"},
        postgresql_where=sa.text("depends_on IS NOT NULL"),
    )
    module.upgrade()
    op.drop_table(TABLE)
