"""Error search over every job, by the parts of what an operator copies; sign-in failures keyed
by user name and address together.

- ``job_error_fts_idx``: GIN on the error text with its ASCII punctuation turned into spaces
  (:data:`ERROR_VECTOR`), WHERE ``last_error <> ''``. It replaces ``job_failed_error_fts_idx``
  (failed jobs only, the error's whole tokens): a job backing off has its error too, and a host
  name, a dotted name or a path is found by its parts (``smtp.example.com`` is indexed as
  smtp, example, com). Partial on a non-empty error, so the drain path never writes to it:
  creates, claims and successes write rows with no error; a failed attempt adds an entry. (pg_trgm
  would allow any infix, but the embedded server ships no contrib extension.) Built
  CONCURRENTLY on a table of :data:`CONCURRENT_FROM_ROWS` rows or more, plainly on a new or
  small one, as 0007 and 0008 do; the old index is dropped the same way once the new one exists.
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

CONCURRENT_FROM_ROWS = 10_000
# The same SQL as dashboard.store.models.ERROR_VECTOR_SQL (a test checks that the search uses it).
ERROR_VECTOR = (
    "to_tsvector('simple'::regconfig, translate(last_error, '!\"#$%&''()*+,-./:;<=>?@[\\]^_`{|}~', "
    "'                                '))"
)
NEW_INDEX = f"job_error_fts_idx ON jobs_job USING gin ({ERROR_VECTOR}) WHERE last_error <> ''"
OLD_INDEX = "job_failed_error_fts_idx ON jobs_job USING gin (to_tsvector('simple', last_error)) WHERE status = 'failed'"


def _large() -> bool:
    rows = op.get_bind().execute(
        sa.text("SELECT count(*) FROM (SELECT 1 FROM jobs_job LIMIT :n) AS sample"),
        {"n": CONCURRENT_FROM_ROWS},
    )
    return rows.scalar() >= CONCURRENT_FROM_ROWS


def _replace(create: str, drop: str) -> None:
    if not _large():
        op.execute(f"CREATE INDEX IF NOT EXISTS {create}")
        op.execute(f"DROP INDEX IF EXISTS {drop}")
        return
    with op.get_context().autocommit_block():
        op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {create}")
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {drop}")


def upgrade():
    op.execute("DELETE FROM auth_signin_failure")
    op.add_column(
        "auth_signin_failure", sa.Column("address", sa.Text, nullable=False, server_default=sa.text("''"))
    )
    op.create_index(
        "auth_signin_failure_address_idx", "auth_signin_failure", ["address", "key", "created_at"]
    )
    _replace(NEW_INDEX, "job_failed_error_fts_idx")


def downgrade():
    _replace(OLD_INDEX, "job_error_fts_idx")
    op.drop_index("auth_signin_failure_address_idx", table_name="auth_signin_failure")
    op.drop_column("auth_signin_failure", "address")
    op.execute("DELETE FROM auth_signin_failure")
