"""The shop's orders.

Revision ID: shop_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "shop_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shop_order",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("item", sa.String(100), nullable=False),
        sa.Column("receipt_sent", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )


def downgrade() -> None:
    op.drop_table("shop_order")
