"""auth_signin_failure: recent failed sign-ins, the shared store of the sign-in throttle.

One row per failed attempt and throttle key (a SHA-256 of ``user:<name>`` or
``address:<client address>``, never the name itself), so every gunicorn worker (and every
host) sees the same counts. Rows older than the throttle's window are deleted, a bounded batch
at a time, whenever a failure is recorded. A plain table and index, created in the migration's
transaction: the table is new and empty, nothing waits on it.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "auth_signin_failure",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    # The throttle's check: the newest failures of one key. Cleanup: the oldest rows.
    op.create_index("auth_signin_failure_key_idx", "auth_signin_failure", ["key", "created_at"])
    op.create_index("auth_signin_failure_created_idx", "auth_signin_failure", ["created_at"])


def downgrade():
    op.drop_table("auth_signin_failure")
