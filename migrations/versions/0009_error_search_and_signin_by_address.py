"""Sign-in failures keyed by user name and address together.

- ``auth_signin_failure.address``: each failure row now holds both digests (``key`` the user
  name's, ``address`` the client address's), so the throttle can count a name's failures from
  one address, from all of them, and the distinct names failed from one address. The rows kept
  so far (one per key) mean nothing to those counts, and they are at most one window
  (minutes) of failures: they are deleted. ``auth_signin_failure_address_idx`` ``(address,
  key, created_at)`` serves the per-address counts. The table is small (about one window of
  failures), so the index is built in the migration's transaction.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    op.execute("DELETE FROM auth_signin_failure")
    op.add_column(
        "auth_signin_failure", sa.Column("address", sa.Text, nullable=False, server_default=sa.text("''"))
    )
    op.create_index(
        "auth_signin_failure_address_idx", "auth_signin_failure", ["address", "key", "created_at"]
    )


def downgrade():
    op.drop_index("auth_signin_failure_address_idx", table_name="auth_signin_failure")
    op.drop_column("auth_signin_failure", "address")
    op.execute("DELETE FROM auth_signin_failure")
