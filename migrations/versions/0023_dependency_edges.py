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

TABLE = "jobs_job_dependency"

# A settled parent's dependents by the edges' primary key, in id order (the lock order of
# concurrent settles).
LOOKUP = (
    "SELECT array_agg(d.child_id ORDER BY d.child_id) INTO found_ids"
    f" FROM {TABLE} AS d WHERE d.parent_id = p;"
)

# Not its last parent: one off, in one statement (the row lock re-reads the newest version, so
# waiting_on > 1 holds for the version it writes); else 0021's lock by primary key, and the
# rest of 0021's function (release, cancel, recount) as it was.
DECREMENT = (
    "UPDATE jobs_job AS w SET waiting_on = w.waiting_on - 1, updated_at = at"
    " WHERE w.id = child_id AND w.status = 'queued'"
    " AND w.available_at = TIMESTAMPTZ '{waiting}' AND w.waiting_on > 1"
    " AND (p_ok OR w.on_parent_failure = 'run');\n"
    "            IF FOUND THEN changed := changed + 1; CONTINUE; END IF;\n            "
)


def _earlier(file: str):
    """An earlier migration's module, read from its file (its texts and helpers, not its revision)."""
    from importlib.util import module_from_spec, spec_from_file_location
    from pathlib import Path

    spec = spec_from_file_location(Path(file).stem, Path(__file__).with_name(file))
    assert spec is not None and spec.loader is not None
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _release_0021():
    """Migration 0021's module: its function's body, pieces and lock."""
    return _earlier("0021_release_by_key.py")


def release_function() -> str:
    """``jobs_release_dependents`` as this migration leaves it: 0021's, with the edge lookup and
    the decrement before its lock."""
    m = _release_0021()
    return m._function(LOOKUP, DECREMENT.replace("{waiting}", m.WAITING_AT) + m.BY_KEY["lock"])


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
    op.execute(release_function())
    op.drop_index("job_depends_on_idx", table_name="jobs_job")


def downgrade():
    """Back to 0021's function and 0018's GIN index."""
    _earlier("0018_workflows.py").create_depends_on_index()
    _release_0021().upgrade()
    op.drop_table(TABLE)
