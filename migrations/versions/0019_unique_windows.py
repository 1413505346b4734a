"""Uniqueness windows and debounce: a job may hold a unique key while it is queued (or running).

Columns of ``jobs_job`` (each nullable: added without a table rewrite, NULL on every job
without a key):

- ``unique_key`` (up to 255 characters): the key;
- ``unique_for`` (seconds, > 0; NULL: no time limit): the window, from the job's ``created_at``;
- ``unique_while`` (``queued`` | ``active``): the states in which it holds the key;
- ``unique_retired_at``: when a later create took the key from it (it had left its states or
  its window); NULL while it holds the key.

``job_unique_key_idx`` is unique over ``unique_key`` where a job holds it (``unique_key IS NOT
NULL AND unique_retired_at IS NULL``): at most one holder per key, whatever the creates that
race; a job without a key has no entry, so the drain path never writes to it.
``job_unique_valid`` keeps the three columns whole. ``jobs_schedule`` gains the same three
options for its runs. ``job_event_type_valid`` also allows ``debounced``.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

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
    "released",
)
UNIQUE_SHAPE = (
    "(unique_key IS NULL AND unique_for IS NULL AND unique_while IS NULL)"
    " OR (unique_key IS NOT NULL AND unique_while IN ('queued', 'active')"
    " AND (unique_for IS NULL OR unique_for > 0))"
)


def _event_types(types: tuple[str, ...]) -> None:
    check = "type IN (" + ", ".join(f"'{t}'" for t in types) + ")"
    op.execute("ALTER TABLE jobs_jobevent DROP CONSTRAINT IF EXISTS job_event_type_valid")
    op.execute(f"ALTER TABLE jobs_jobevent ADD CONSTRAINT job_event_type_valid CHECK ({check}) NOT VALID")
    op.execute("ALTER TABLE jobs_jobevent VALIDATE CONSTRAINT job_event_type_valid")


def _options(table: str) -> None:
    op.add_column(table, sa.Column("unique_key", sa.String(255), nullable=True))
    op.add_column(table, sa.Column("unique_for", sa.Float(), nullable=True))
    op.add_column(table, sa.Column("unique_while", sa.String(8), nullable=True))


def upgrade():
    _options("jobs_job")
    op.add_column("jobs_job", sa.Column("unique_retired_at", sa.DateTime(timezone=True), nullable=True))
    op.create_check_constraint("job_unique_valid", "jobs_job", UNIQUE_SHAPE)
    op.create_index(
        "job_unique_key_idx",
        "jobs_job",
        ["unique_key"],
        unique=True,
        postgresql_where=sa.text("unique_key IS NOT NULL AND unique_retired_at IS NULL"),
    )
    _options("jobs_schedule")
    _event_types((*EVENT_TYPES, "debounced"))


def downgrade():
    op.execute("DELETE FROM jobs_jobevent WHERE type = 'debounced'")
    _event_types(EVENT_TYPES)
    for column in ("unique_while", "unique_for", "unique_key"):
        op.drop_column("jobs_schedule", column)
    op.drop_index("job_unique_key_idx", table_name="jobs_job")
    op.drop_constraint("job_unique_valid", "jobs_job", type_="check")
    for column in ("unique_retired_at", "unique_while", "unique_for", "unique_key"):
        op.drop_column("jobs_job", column)
