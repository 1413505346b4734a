"""An event's job is checked once per statement, not once per row: the foreign key becomes triggers.

``jobs_jobevent_job_id_fk`` checked every inserted event on its own: one prepared query per row,
which also locked the job's row (``FOR KEY SHARE``) and so wrote that row's page and a WAL
record again, right after the statement had written the row itself. A bulk create of 1,000
jobs ran 1,000 of them; a worker's claim-and-settle statement two. Measured on this project's
bench machine, the check was about a quarter of a bulk create's time and a tenth of a
claim-and-settle cycle's (docs/benchmarks.md).

The same rule, kept in the database by five triggers:

1. ``jobs_jobevent_job_exists``, after each statement that inserts events: an event whose job
   this transaction wrote (created it, or moved it in the event's own statement, as every
   statement of this project does) needs nothing more: the row is the transaction's own until
   it commits, so no one else can delete it meanwhile. One read of the jobs' primary key for
   the statement's events, each probed by id. Any other event's job is locked as the foreign
   key locked it (``FOR KEY SHARE``, in id order) and must exist, or the statement fails with
   ``foreign_key_violation`` (SQLSTATE 23503) as before.
2. ``jobs_job_events_go_too``, after each statement that deletes jobs: their events go, as
   ``ON DELETE CASCADE`` did (retention and the delete action delete them first, and then this
   finds none).
3. ``jobs_job_id_fixed`` and ``jobs_jobevent_job_fixed``: a job's id and an event's job never
   change (the foreign key refused a referenced id's change; events are append-only).
4. ``jobs_job_truncate_with_events``: ``TRUNCATE jobs_job`` alone, with events left, is refused,
   as the foreign key refused it; ``TRUNCATE jobs_job, jobs_jobevent`` works as before.

"This transaction wrote the row" is the row version's ``xmin`` being the transaction's own id.
A row written in a subtransaction (a savepoint) carries the subtransaction's id instead, and
takes the locking path, which is correct and only slower. A row frozen some multiple of 2^32
transactions ago keeps its raw ``xmin`` and so could carry the same number: an event for that
job added by a transaction that did not write it then goes unlocked, and a delete of the job at
that very moment could leave the event behind. As with the foreign key, the cascade sees what
is committed when it runs (READ COMMITTED, this project's level); a job deleted in a REPEATABLE
READ transaction while another transaction, which had not written the job, adds an event for
it could also leave that event behind, where the foreign key would have failed the delete.
Nothing in this project adds an event without writing its job, so neither case arises from
its own statements.

The downgrade puts the foreign key back, validated (it fails if an event names a missing job).

Revision ID: 0024
Revises: 0023
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

FOREIGN_KEY = "jobs_jobevent_job_id_fk"

# The events of one statement: each probed by id (the LATERAL's LIMIT keeps it a probe per
# event whatever the plan cache last saw), own rows first; the rest locked, then counted.
EXISTS_FUNCTION = """
CREATE FUNCTION jobs_jobevent_job_exists() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    own xid := pg_current_xact_id()::xid;
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM new_events AS e
        LEFT JOIN LATERAL (
            SELECT 1 AS hit FROM jobs_job AS j WHERE j.id = e.job_id AND j.xmin = own LIMIT 1
        ) AS mine ON true
        WHERE mine.hit IS NULL
    ) THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM (SELECT DISTINCT e.job_id FROM new_events AS e ORDER BY e.job_id) AS e,
        LATERAL (
            SELECT 1 FROM jobs_job AS j WHERE j.id = e.job_id AND j.xmin <> own FOR KEY SHARE OF j
        ) AS locked;
    IF EXISTS (
        SELECT 1 FROM new_events AS e
        LEFT JOIN LATERAL (
            SELECT 1 AS hit FROM jobs_job AS j WHERE j.id = e.job_id LIMIT 1
        ) AS found ON true
        WHERE found.hit IS NULL
    ) THEN
        RAISE EXCEPTION 'insert on table "jobs_jobevent" violates its job reference'
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = 'An event names a job that does not exist.';
    END IF;
    RETURN NULL;
END $$
"""

CASCADE_FUNCTION = """
CREATE FUNCTION jobs_job_events_go_too() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM jobs_jobevent WHERE job_id = ANY (ARRAY(SELECT g.id FROM gone AS g));
    RETURN NULL;
END $$
"""

FIXED_FUNCTION = """
CREATE FUNCTION jobs_reference_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'foreign_key_violation';
END $$
"""

TRUNCATE_FUNCTION = """
CREATE FUNCTION jobs_job_truncate_with_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM jobs_jobevent) THEN
        RAISE EXCEPTION 'cannot truncate jobs_job without jobs_jobevent'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Truncate jobs_jobevent in the same command.';
    END IF;
    RETURN NULL;
END $$
"""

FUNCTIONS = {
    "jobs_jobevent_job_exists": EXISTS_FUNCTION,
    "jobs_job_events_go_too": CASCADE_FUNCTION,
    "jobs_reference_fixed": FIXED_FUNCTION,
    "jobs_job_truncate_with_events": TRUNCATE_FUNCTION,
}

# Each trigger by name: its table and the rest of its definition.
TRIGGERS = {
    "jobs_jobevent_job_exists": (
        "jobs_jobevent",
        "AFTER INSERT ON jobs_jobevent REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT"
        " EXECUTE FUNCTION jobs_jobevent_job_exists()",
    ),
    "jobs_job_events_go_too": (
        "jobs_job",
        "AFTER DELETE ON jobs_job REFERENCING OLD TABLE AS gone FOR EACH STATEMENT"
        " EXECUTE FUNCTION jobs_job_events_go_too()",
    ),
    "jobs_job_id_fixed": (
        "jobs_job",
        "BEFORE UPDATE OF id ON jobs_job FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)"
        " EXECUTE FUNCTION jobs_reference_fixed('a job''s id cannot change')",
    ),
    "jobs_jobevent_job_fixed": (
        "jobs_jobevent",
        "BEFORE UPDATE OF job_id ON jobs_jobevent FOR EACH ROW"
        " WHEN (OLD.job_id IS DISTINCT FROM NEW.job_id)"
        " EXECUTE FUNCTION jobs_reference_fixed('an event''s job cannot change')",
    ),
    "jobs_job_truncate_with_events": (
        "jobs_job",
        "AFTER TRUNCATE ON jobs_job FOR EACH STATEMENT EXECUTE FUNCTION jobs_job_truncate_with_events()",
    ),
}


def upgrade():
    for text in FUNCTIONS.values():
        op.execute(text)
    for name, (_table, definition) in TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {definition}")
    op.drop_constraint(FOREIGN_KEY, "jobs_jobevent", type_="foreignkey")


def downgrade():
    # NOT VALID, then validated: the existing events are checked under a lock that lets writers
    # go on, not one that stops both tables for the whole scan.
    op.create_foreign_key(
        FOREIGN_KEY,
        "jobs_jobevent",
        "jobs_job",
        ["job_id"],
        ["id"],
        ondelete="CASCADE",
        postgresql_not_valid=True,
    )
    for name, (table, _definition) in TRIGGERS.items():
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
    for name in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {name}()")
    op.execute(f"ALTER TABLE jobs_jobevent VALIDATE CONSTRAINT {FOREIGN_KEY}")
