"""The charts' events in time order: ``jobs_jobevent_created_at_idx`` holds only claims and outcomes.

The overview's charts read the hour's newest events through this index, and used only claims,
successes, failures and retries of them. Every other event stood in their way: a bulk enqueue of
50,000 jobs writes 50,000 ``created`` events at one instant, and a read of the hour's newest
events found nothing else, so the charts went blind (or showed a minute read in part: a
failure rate of 100 %). Now the index holds those four kinds only (:data:`KINDS`, the store's
``states.CHART_EVENTS``), so nothing else can crowd them. Nothing else reads events by time
(the feed goes by id, a job's timeline by job and id). A ``created``, ``progress`` or
``lease_renewed`` event is no longer written to it.

The index keeps the reference's name, as 0014 does: built under :data:`BUILDING`, the old one
dropped, the new one renamed; ``CONCURRENTLY`` on a table of :data:`CONCURRENT_FROM_ROWS` rows
or more, so writers are not blocked; a run interrupted half way leaves :data:`BUILDING`, which
the next run drops and builds again. Downgrade rebuilds it on every event.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

CONCURRENT_FROM_ROWS = 10_000
NAME = "jobs_jobevent_created_at_idx"
BUILDING = "jobs_jobevent_created_at_building"
KINDS = ("claimed", "succeeded", "failed", "retry_scheduled")


def upgrade():
    _rebuild("type IN (" + ", ".join(f"'{kind}'" for kind in KINDS) + ")")


def downgrade():
    _rebuild(None)


def _rebuild(where: str | None) -> None:
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_jobevent LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    if rows.scalar() < CONCURRENT_FROM_ROWS:
        _swap(where, concurrently=False)
        return
    with op.get_context().autocommit_block():
        _swap(where, concurrently=True)


def _swap(where: str | None, *, concurrently: bool) -> None:
    options = {"table_name": "jobs_jobevent", "postgresql_concurrently": concurrently}
    op.drop_index(BUILDING, if_exists=True, **options)
    op.create_index(
        BUILDING,
        "jobs_jobevent",
        ["created_at"],
        postgresql_where=sa.text(where) if where else None,
        postgresql_concurrently=concurrently,
    )
    op.drop_index(NAME, if_exists=True, **options)
    op.execute(f"ALTER INDEX {BUILDING} RENAME TO {NAME}")
