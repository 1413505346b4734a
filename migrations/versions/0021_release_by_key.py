"""The release trigger finds a settled parent's dependents by its GIN index, then locks each by
its primary key.

``jobs_release_dependents`` (migration 0018) looked its dependents up in one statement that
also asked for ``status = 'queued' AND available_at = WAITING_AT``. Whenever the statistics
said few jobs wait, the planner took ``jobs_job_available_at_idx`` for it and read every
waiting job, testing each one's ``depends_on``, at every settle of a job with dependents: a
cost that grows with the waiting backlog, and twice the GIN lookup's already with a hundred
jobs waiting (docs/benchmarks.md). Now:

1. the dependents' ids come from ``job_depends_on_idx`` alone (``depends_on @> ARRAY[parent]``,
   no lock);
2. each is locked in id order (``id = …``: the primary key, whatever the statistics say), and
   skipped unless it still waits.

The rest of the function, and what the trigger guarantees, are as in 0018: the dependent's row
lock orders concurrent settles of its parents, a job is released only while it still waits,
under that lock, and a create that names a parent takes the parent's lock first, so a
dependent created before the settling statement's snapshot is seen by it.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

WAITING_AT = "9999-12-31 00:00:00+00"
NOTIFY_CHANNEL = "jobqueue_jobs"

BODY = """
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
        {lookup}
        CONTINUE WHEN found_ids IS NULL;
        FOREACH child_id IN ARRAY found_ids LOOP
            {lock}
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
"""

COLUMNS = "id, queue, attempts, depends_on, on_parent_failure, waiting_on, has_dependents, not_before"

# Ids by the GIN index alone, in id order (the lock order of concurrent settles); then each
# dependent locked by its primary key, and skipped unless it still waits.
BY_KEY = {
    "lookup": "SELECT array_agg(id ORDER BY id) INTO found_ids FROM jobs_job WHERE depends_on @> ARRAY[p];",
    "lock": f"SELECT {COLUMNS} INTO child FROM jobs_job WHERE id = child_id AND status = 'queued'"
    f" AND available_at = TIMESTAMPTZ '{WAITING_AT}' FOR UPDATE;",
}


def _function(lookup: str, lock: str) -> str:
    body = BODY.replace("{lookup}", lookup).replace("{lock}", lock).replace("{channel}", NOTIFY_CHANNEL)
    return (
        "CREATE OR REPLACE FUNCTION jobs_release_dependents(parent uuid, parent_ok boolean, at timestamptz)\n"
        "RETURNS integer LANGUAGE plpgsql AS $$" + body + "$$"
    )


def upgrade():
    op.execute(_function(**BY_KEY))


def downgrade():
    """Back to 0018's function (read from that migration's file: one text of it)."""
    from importlib.util import module_from_spec, spec_from_file_location
    from pathlib import Path

    spec = spec_from_file_location("workflows_0018", Path(__file__).with_name("0018_workflows.py"))
    assert spec is not None and spec.loader is not None
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    op.execute(module.RELEASE_FUNCTION)
