"""The worker-side statements' clock, written once: ``jobs_now(given)``.

``jobs_now(:now)`` is ``COALESCE(:now, statement_timestamp())``: the database's clock when the
statement starts, unless the caller passes ``:now`` (tests move the clock so). A plain SQL
function, ``STABLE`` like ``statement_timestamp()``, with one use of its argument: the planner
inlines it, so a statement plans exactly as with the expression written out
(``docs/performance.md`` shows the plans).

Revision ID: 0018
Revises: 0017
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade():
    op.execute(
        """
        CREATE OR REPLACE FUNCTION jobs_now(given timestamptz) RETURNS timestamptz
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$ SELECT COALESCE(given, statement_timestamp()) $$
        """
    )


def downgrade():
    op.execute("DROP FUNCTION IF EXISTS jobs_now(timestamptz)")
