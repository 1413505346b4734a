"""The migration builds exactly what the models declare, and the database enforces the rules."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.sql import query
from tests.support.factories import seed_analysed_backlog

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_upgrade_leaves_no_difference_between_models_and_schema(app):
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
    assert diff == []


@pytest.mark.parametrize("now", [NOW, None], ids=["now given", "database clock"])
def test_claim_uses_the_claim_index_in_order_without_sorting(app, now):
    """The claim reads each served queue's range of job_queue_claim_idx in order; a Sort would
    mean reading every queued row.

    Planned on an analysed backlog (:func:`tests.support.factories.seed_analysed_backlog`, rolled back)
    with every plan type allowed; the same whether the claim's time is given or the database's."""
    params = {"now": now, "worker_ids": ["w"], "lease_seconds": 30.0, "avoid_expired": False, "queues": None}
    claim = query("claim")
    explain = text("EXPLAIN " + claim.text).bindparams(*claim._bindparams.values())
    with db.engine.connect() as conn, conn.begin() as transaction:
        seed_analysed_backlog(conn, NOW)
        plan = "\n".join(row[0] for row in conn.execute(explain, params))
        transaction.rollback()
    picked = plan.split("CTE picked")[1].split("CTE next")[0]
    selection = picked.split("Subquery Scan on p ")[1]  # the locked read of one queue's range
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
