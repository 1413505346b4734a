"""The migration builds exactly what the models declare, and the database enforces the rules."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.sql import LEASE_EXPIRED_PREFIX, query
from tests.support.factories import seed_analysed_backlog

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_upgrade_leaves_no_difference_between_models_and_schema(app):
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
    assert diff == []


@pytest.mark.parametrize("name", ["claim", "claim_no_limits"])
@pytest.mark.parametrize("now", [NOW, None], ids=["now given", "database clock"])
def test_claim_uses_the_claim_index_in_order_without_sorting(app, now, name):
    """The claim reads each served queue's range of job_queue_claim_idx in order; a Sort would
    mean reading every queued row.

    Planned on an analysed backlog (:func:`tests.support.factories.seed_analysed_backlog`, rolled back)
    with every plan type allowed; the same whether the claim's time is given or the database's."""
    params = {
        "now": now,
        "worker_ids": ["w"] * 16,
        "lease_seconds": 30.0,
        "avoid_expired": False,
        "queues": None,
    }
    claim = query(name)
    explain = text("EXPLAIN " + claim.text).bindparams(*claim._bindparams.values())
    with db.engine.connect() as conn, conn.begin() as transaction:
        seed_analysed_backlog(conn, NOW)
        plan = "\n".join(row[0] for row in conn.execute(explain, params))
        transaction.rollback()
    assert "Seq Scan on jobs_job" not in plan, plan
    picked = plan.split("CTE picked")[1].split("\n  CTE ")[0]
    selection = picked.split("Subquery Scan on job ")[1]  # the locked read of one queue's range
    assert "Index Scan using job_queue_claim_idx" in selection, plan
    assert "Sort" not in selection, plan


def test_constraints_and_indexes_have_the_contract_names(app):
    with db.engine.connect() as conn:
        constraints = dict(
            conn.exec_driver_sql(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid IN ('jobs_job'::regclass, 'jobs_jobevent'::regclass)"
            ).all()
        )
        indexes = dict(
            conn.exec_driver_sql(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('jobs_job', 'jobs_jobevent')"
            ).all()
        )
    assert {"job_status_valid_shape", "job_attempts_valid"} <= constraints.keys()
    assert "WHERE ((status)::text = 'queued'::text)" in indexes["job_claim_idx"]
    assert "(priority DESC, available_at, created_at, id)" in indexes["job_claim_idx"]
    assert "WHERE ((status)::text = 'running'::text)" in indexes["job_timeout_idx"]
    assert "UNIQUE" in indexes["job_idempotency_key_unique"]
    assert "WHERE (idempotency_key IS NOT NULL)" in indexes["job_idempotency_key_unique"]
    assert "(job_id, id)" in indexes["job_event_job_id_idx"]
    assert "job_event_id_idx" in indexes
    assert "(created_at DESC, id DESC) WHERE (last_error <> ''::text)" in indexes["job_error_created_idx"]


BASE = {
    "type": "demo.success",
    "status": "queued",
    "available_at": NOW,
    "attempts": 0,
    "max_attempts": 3,
    "locked_by": None,
    "locked_until": None,
    "finished_at": None,
    "created_at": NOW,
    "updated_at": NOW,
}

BAD_ROWS = {
    "queued with a lock": {"locked_by": "w", "locked_until": NOW},
    "queued with a finish time": {"finished_at": NOW},
    "running without a lease": {"status": "running", "attempts": 1, "locked_by": "w"},
    "running without an owner": {"status": "running", "attempts": 1, "locked_until": NOW},
    "running and finished": {
        "status": "running",
        "attempts": 1,
        "locked_by": "w",
        "locked_until": NOW,
        "finished_at": NOW,
    },
    "succeeded without a finish time": {"status": "succeeded", "attempts": 1},
    "failed still locked": {
        "status": "failed",
        "attempts": 3,
        "locked_by": "w",
        "locked_until": NOW,
        "finished_at": NOW,
    },
    "unknown status": {"status": "paused"},
    "negative attempts": {"attempts": -1},
    "zero max_attempts": {"max_attempts": 0, "attempts": 0},
    "attempts above max": {"attempts": 4, "max_attempts": 3},
}


@pytest.mark.parametrize("changes", BAD_ROWS.values(), ids=BAD_ROWS.keys())
def test_raw_sql_insert_breaking_the_rules_is_refused(app, libpq_url, changes):
    row = {**BASE, **changes, "id": uuid.uuid4()}
    columns = ", ".join(row)
    values = ", ".join(f"%({k})s" for k in row)
    with psycopg.connect(libpq_url) as conn, pytest.raises(psycopg.errors.CheckViolation) as err:
        conn.execute(f"INSERT INTO jobs_job ({columns}) VALUES ({values})", row)
    assert err.value.diag.constraint_name in {"job_status_valid_shape", "job_attempts_valid"}


def test_raw_sql_insert_of_a_valid_row_is_accepted(app, libpq_url):
    row = {**BASE, "id": uuid.uuid4()}
    columns = ", ".join(row)
    values = ", ".join(f"%({k})s" for k in row)
    with psycopg.connect(libpq_url) as conn:
        conn.execute(f"INSERT INTO jobs_job ({columns}) VALUES ({values})", row)
        assert conn.execute("SELECT count(*) FROM jobs_job").fetchone() == (1,)


def test_duplicate_idempotency_key_is_refused_but_many_nulls_are_fine(app, libpq_url):
    insert = (
        "INSERT INTO jobs_job (id, type, status, available_at, created_at, updated_at, idempotency_key) "
        "VALUES (gen_random_uuid(), 'demo.success', 'queued', now(), now(), now(), %s)"
    )
    with psycopg.connect(libpq_url) as conn:
        conn.execute(insert, (None,))
        conn.execute(insert, (None,))
        conn.execute(insert, ("k1",))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(insert, ("k1",))


def test_unknown_event_type_is_refused(app, libpq_url):
    with psycopg.connect(libpq_url) as conn:
        conn.execute(
            "INSERT INTO jobs_job (id, type, status, available_at, created_at, updated_at) "
            "VALUES ('00000000-0000-0000-0000-000000000001', 't', 'queued', now(), now(), now())"
        )
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                "INSERT INTO jobs_jobevent (job_id, type, created_at) "
                "VALUES ('00000000-0000-0000-0000-000000000001', 'teleported', now())"
            )


# 60,000 due jobs all in `default`, evenly over five priorities: analysed, the queue column has
# one value. Without migration 0013 every generic plan below read the other queues through
# job_claim_idx or job_queued_idx with a filter on queue.
ONE_QUEUE_BACKLOG = """
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts, max_attempts,
                          last_error, created_at, updated_at)
    SELECT gen_random_uuid(), 'demo.t', '{}', 'queued', (g % 5) * 10,
           now() - interval '1 hour' + g * interval '1 microsecond', 0, 3, '',
           now() - interval '1 hour', now()
    FROM generate_series(1, 60000) AS g
"""

ONE_JOB_STATEMENTS = [
    "claim_one",
    "claim_one_no_limits",
    "complete_and_claim",
    "complete_and_claim_no_limits",
    "complete_and_claim_with_progress",
    "complete_and_claim_with_progress_no_limits",
    "complete_and_claim_only_queue",
    "complete_and_claim_with_progress_only_queue",
]

PLANS = [
    *((name, "force_generic_plan") for name in ONE_JOB_STATEMENTS),
    ("claim", "force_custom_plan"),  # batch mode's: planned for each claim's 16 ids
    ("claim_no_limits", "force_custom_plan"),
    ("limits_open", "force_generic_plan"),  # a one-job thread's, now and then
]


@pytest.mark.parametrize(("name", "plans"), PLANS)
def test_each_claim_reads_one_queue_range_at_a_time(app, name, plans):
    """A one-job worker thread runs its statements with generic plans (connection.connect_worker),
    planned once on whatever statistics the table has then; batch mode's claims are planned
    for each claim. Planned on a backlog all in one queue (the column's statistics say one
    value, so a filter on queue looked free), with an empty queue and a limited one served
    beside it: the job reads must still be ranges of a queue-leading index
    (job_queue_claim_idx for the claim, job_queued_queue_idx for whether a limited queue has a
    job due), never job_claim_idx or another index with a filter on queue, which would walk
    the whole backlog to find the empty queue's nothing (migration 0013 sets the queue
    column's statistics so)."""
    from dashboard.store.connection import _compile

    compiled = _compile(query(name))
    with db.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text(ONE_QUEUE_BACKLOG))
        conn.exec_driver_sql("ANALYZE jobs_job")
        conn.exec_driver_sql(
            "INSERT INTO jobs_queue (name, concurrency_limit, rate_count, rate_period_seconds) "
            "VALUES ('default', NULL, NULL, NULL), ('empty', NULL, NULL, NULL), ('limited', 2, 5, 1)"
        )
        conn.exec_driver_sql(f"SET LOCAL plan_cache_mode = {plans}")
        raw = conn.connection.driver_connection
        raw.execute(f"PREPARE claim_plan AS {compiled.sql}")
        try:
            given = {  # a custom plan folds constants: a NULL here could fold a condition away
                "worker_ids": "ARRAY[" + ", ".join(["'w'"] * 16) + "]",
                "lease_seconds": "30",
                "avoid_expired": "false",
                "lease_expired_prefix": f"'{LEASE_EXPIRED_PREFIX}'",
            }
            args = ", ".join(given.get(param, "NULL") for param in compiled.names)
            plan = "\n".join(row[0] for row in raw.execute(f"EXPLAIN EXECUTE claim_plan({args})"))
        finally:
            raw.execute("DEALLOCATE claim_plan")  # a prepared statement outlives the transaction
        transaction.rollback()
    lines = plan.splitlines()
    conditions = {  # each read of jobs_job: its conditions
        i: "".join(itertools.takewhile(lambda below: "->" not in below, lines[i + 1 : i + 6]))
        for i, line in enumerate(lines)
        if " on jobs_job " in line
    }
    queue_reads = [  # those that name the queue, but not one job by its id (the settled job's guard)
        lines[i]
        for i, text in conditions.items()
        if "queue" in text and "(id = $" not in text and "jobs_job_pkey" not in lines[i]
    ]
    if name != "limits_open":
        assert any("job_queue_claim_idx" in line for line in queue_reads), plan  # the claim's own read
    assert all("job_queue_claim_idx" in line or "job_queued_queue_idx" in line for line in queue_reads), plan
