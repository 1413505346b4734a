"""Create jobs_job and jobs_jobevent with the row-shape constraints and the queue indexes.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 21:04:54.821504

"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():

    op.create_table(
        "jobs_job",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("type", sa.String(length=120), nullable=False),
        sa.Column(
            "payload",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=16), server_default=sa.text("'queued'"), nullable=False),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("50"), nullable=False),
        sa.Column("available_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default=sa.text("3"), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("locked_by", sa.String(length=255), nullable=True),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(status = 'queued' AND locked_by IS NULL AND locked_until IS NULL AND finished_at IS NULL) OR (status = 'running' AND locked_by IS NOT NULL AND locked_until IS NOT NULL AND finished_at IS NULL) OR (status IN ('succeeded', 'failed') AND locked_by IS NULL AND locked_until IS NULL AND finished_at IS NOT NULL)",
            name="job_status_valid_shape",
        ),
        sa.CheckConstraint(
            "attempts >= 0 AND max_attempts >= 1 AND attempts <= max_attempts", name="job_attempts_valid"
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("jobs_job", schema=None) as batch_op:
        batch_op.create_index(
            "job_claim_idx",
            ["available_at", sa.literal_column("priority DESC"), "created_at", "id"],
            unique=False,
            postgresql_where=sa.text("status = 'queued'"),
        )
        batch_op.create_index(
            "job_idempotency_key_unique",
            ["idempotency_key"],
            unique=True,
            postgresql_where=sa.text("idempotency_key IS NOT NULL"),
        )
        batch_op.create_index(
            "job_timeout_idx", ["locked_until"], unique=False, postgresql_where=sa.text("status = 'running'")
        )
        batch_op.create_index("jobs_job_available_at_idx", ["available_at"], unique=False)
        batch_op.create_index("jobs_job_created_at_idx", ["created_at"], unique=False)
        batch_op.create_index("jobs_job_status_idx", ["status"], unique=False)

    op.create_table(
        "jobs_jobevent",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("worker_id", sa.String(length=255), nullable=True),
        sa.Column("message", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column(
            "data",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "type IN ('created', 'claimed', 'progress', 'lease_renewed', 'succeeded', 'retry_scheduled', 'failed', 'timeout_requeued', 'manual_retry')",
            name="job_event_type_valid",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs_job.id"], name="jobs_jobevent_job_id_fk", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("jobs_jobevent", schema=None) as batch_op:
        batch_op.create_index("job_event_id_idx", ["id"], unique=False)
        batch_op.create_index("job_event_job_id_idx", ["job_id", "id"], unique=False)
        batch_op.create_index("jobs_jobevent_created_at_idx", ["created_at"], unique=False)
        batch_op.create_index("jobs_jobevent_type_idx", ["type"], unique=False)


def downgrade():

    with op.batch_alter_table("jobs_jobevent", schema=None) as batch_op:
        batch_op.drop_index("jobs_jobevent_type_idx")
        batch_op.drop_index("jobs_jobevent_created_at_idx")
        batch_op.drop_index("job_event_job_id_idx")
        batch_op.drop_index("job_event_id_idx")

    op.drop_table("jobs_jobevent")
    with op.batch_alter_table("jobs_job", schema=None) as batch_op:
        batch_op.drop_index("jobs_job_status_idx")
        batch_op.drop_index("jobs_job_created_at_idx")
        batch_op.drop_index("jobs_job_available_at_idx")
        batch_op.drop_index("job_timeout_idx", postgresql_where=sa.text("status = 'running'"))
        batch_op.drop_index(
            "job_idempotency_key_unique", postgresql_where=sa.text("idempotency_key IS NOT NULL")
        )
        batch_op.drop_index("job_claim_idx", postgresql_where=sa.text("status = 'queued'"))

    op.drop_table("jobs_job")
