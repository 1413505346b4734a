"""An event names a job that exists, and goes with it: kept by triggers (migration 0024), as the
foreign key kept it, checked once per statement.

Each test drives the rule through raw SQL on its own connections, as a script or a host app
would; the project's own statements are covered by every other store test."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import errors

INSERT_JOB = (
    "INSERT INTO jobs_job (id, type, status, available_at, created_at, updated_at) "
    "VALUES (%s, 'demo.success', 'queued', now(), now(), now())"
)
INSERT_EVENT = "INSERT INTO jobs_jobevent (job_id, type, created_at) VALUES (%s, 'progress', now())"


def committed_job(libpq_url: str, events: int = 0) -> uuid.UUID:
    """A job committed by another transaction (an event for it takes the locking path), with
    ``events`` events."""
    job_id = uuid.uuid4()
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        conn.execute(INSERT_JOB, (job_id,))
        for _ in range(events):
            conn.execute(INSERT_EVENT, (job_id,))
    return job_id


def events_of(libpq_url: str, job_id: uuid.UUID) -> int:
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM jobs_jobevent WHERE job_id = %s", (job_id,)).fetchone()
    assert row is not None
    return int(row[0])


OWN_OR_COMMITTED = pytest.mark.parametrize(
    "own", [True, False], ids=["job of this transaction", "committed job"]
)


@OWN_OR_COMMITTED
def test_an_event_for_an_existing_job_is_accepted(app, libpq_url, own):
    job_id = uuid.uuid4() if own else committed_job(libpq_url)
    with psycopg.connect(libpq_url) as conn:
        if own:
            conn.execute(INSERT_JOB, (job_id,))
        conn.execute(INSERT_EVENT, (job_id,))
    assert events_of(libpq_url, job_id) == 1


@OWN_OR_COMMITTED
def test_a_statement_with_one_unknown_job_inserts_nothing(app, libpq_url, own):
    job_id = uuid.uuid4() if own else committed_job(libpq_url)
    missing = uuid.uuid4()
    with psycopg.connect(libpq_url) as conn:
        if own:
            conn.execute(INSERT_JOB, (job_id,))
        with pytest.raises(errors.ForeignKeyViolation):
            conn.execute(
                "INSERT INTO jobs_jobevent (job_id, type, created_at) "
                "SELECT unnest(CAST(%s AS uuid[])), 'progress', now()",
                ([job_id, missing],),
            )
    assert events_of(libpq_url, job_id) == 0
    assert events_of(libpq_url, missing) == 0


def test_a_deleted_job_takes_its_events(app, libpq_url):
    kept, gone = committed_job(libpq_url, events=1), committed_job(libpq_url, events=2)
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        conn.execute("DELETE FROM jobs_job WHERE id = %s", (gone,))
    assert (events_of(libpq_url, kept), events_of(libpq_url, gone)) == (1, 0)


def test_an_event_being_added_holds_off_its_job_s_delete(app, libpq_url):
    """The event's transaction did not write the job: it locks it, as the foreign key did, so a
    delete waits for it and then takes the event along."""
    job_id = committed_job(libpq_url)
    with psycopg.connect(libpq_url) as adder, psycopg.connect(libpq_url) as deleter:
        adder.execute(INSERT_EVENT, (job_id,))  # open: the job is locked
        deleter.execute("SET lock_timeout = '300ms'")
        with pytest.raises(errors.LockNotAvailable):
            deleter.execute("DELETE FROM jobs_job WHERE id = %s", (job_id,))
        deleter.rollback()
        adder.commit()
        deleter.execute("DELETE FROM jobs_job WHERE id = %s", (job_id,))
        deleter.commit()
    assert events_of(libpq_url, job_id) == 0


def test_an_event_for_a_job_being_deleted_waits_and_is_refused(app, libpq_url):
    job_id = committed_job(libpq_url)
    with psycopg.connect(libpq_url) as deleter, psycopg.connect(libpq_url) as adder:
        deleter.execute("DELETE FROM jobs_job WHERE id = %s", (job_id,))  # open
        adder.execute("SET lock_timeout = '300ms'")
        with pytest.raises(errors.LockNotAvailable):  # it waits for the delete
            adder.execute(INSERT_EVENT, (job_id,))
        adder.rollback()
        deleter.commit()
        with pytest.raises(errors.ForeignKeyViolation):
            adder.execute(INSERT_EVENT, (job_id,))
    assert events_of(libpq_url, job_id) == 0


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE jobs_job SET id = gen_random_uuid() WHERE id = %s",
        "UPDATE jobs_jobevent SET job_id = gen_random_uuid() WHERE job_id = %s",
    ],
    ids=["a job's id", "an event's job"],
)
def test_the_reference_cannot_be_changed(app, libpq_url, statement):
    job_id = committed_job(libpq_url, events=1)
    with psycopg.connect(libpq_url) as conn, pytest.raises(errors.ForeignKeyViolation):
        conn.execute(statement, (job_id,))
    assert events_of(libpq_url, job_id) == 1


def test_the_jobs_are_truncated_only_with_their_events(app, libpq_url):
    committed_job(libpq_url, events=1)
    with psycopg.connect(libpq_url) as conn:
        with pytest.raises(errors.FeatureNotSupported):
            conn.execute("TRUNCATE jobs_job")
        conn.rollback()
        conn.execute("TRUNCATE jobs_job, jobs_jobevent")
        conn.commit()
        assert conn.execute(
            "SELECT (SELECT count(*) FROM jobs_job), (SELECT count(*) FROM jobs_jobevent)"
        ).fetchone() == (0, 0)
