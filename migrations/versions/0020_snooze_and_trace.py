"""Snooze and tracing: ``jobs_job.snoozes``, ``jobs_job.traceparent`` and the ``snoozed`` event.

Columns of ``jobs_job``, each added without a table rewrite (a constant default, or nullable):

- ``snoozes`` (integer, 0): how many attempts of the job ended by snoozing (``raise
  Snooze(seconds)``). A snooze also adds one to ``max_attempts``, so the claims, the rescue
  and the failure rule (``attempts < max_attempts``) and ``job_attempts_valid`` stay as they
  are: the budget the job was created with is ``max_attempts - snoozes``. A manual retry
  gives both back (``actions.sql``). ``job_snoozes_valid``: ``0 <= snoozes < max_attempts``.
- ``traceparent`` (up to 55 characters, NULL when none): the W3C trace context current when
  the job was created (OpenTelemetry), which its attempts' spans continue.

``job_event_type_valid`` also allows ``snoozed``. The constraint is rebuilt from its own
current list (read from the catalog), so the types other revisions add are kept, whatever
their order.

Revision ID: 0020
Revises: 0019
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

SNOOZED = "snoozed"


def _event_types() -> list[str]:
    definition = (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conname = 'job_event_type_valid' AND conrelid = 'jobs_jobevent'::regclass"
            )
        )
        .scalar_one()
    )
    return re.findall(r"'([a-z_]+)'", definition)


def _allow(types: list[str]) -> None:
    check = "type IN (" + ", ".join(f"'{t}'" for t in types) + ")"
    op.execute("ALTER TABLE jobs_jobevent DROP CONSTRAINT IF EXISTS job_event_type_valid")
    op.execute(f"ALTER TABLE jobs_jobevent ADD CONSTRAINT job_event_type_valid CHECK ({check}) NOT VALID")
    op.execute("ALTER TABLE jobs_jobevent VALIDATE CONSTRAINT job_event_type_valid")


def upgrade():
    op.add_column("jobs_job", sa.Column("snoozes", sa.Integer(), server_default=sa.text("0"), nullable=False))
    op.add_column("jobs_job", sa.Column("traceparent", sa.String(55), nullable=True))
    op.execute(
        "ALTER TABLE jobs_job ADD CONSTRAINT job_snoozes_valid "
        "CHECK (snoozes >= 0 AND snoozes < max_attempts) NOT VALID"
    )
    op.execute("ALTER TABLE jobs_job VALIDATE CONSTRAINT job_snoozes_valid")
    types = _event_types()
    if SNOOZED not in types:
        _allow([*types, SNOOZED])


def downgrade():
    op.execute("DELETE FROM jobs_jobevent WHERE type = 'snoozed'")
    _allow([t for t in _event_types() if t != SNOOZED])
    op.execute(
        "UPDATE jobs_job SET max_attempts = GREATEST(max_attempts - snoozes, attempts, 1) WHERE snoozes > 0"
    )
    op.drop_constraint("job_snoozes_valid", "jobs_job", type_="check")
    op.drop_column("jobs_job", "traceparent")
    op.drop_column("jobs_job", "snoozes")
