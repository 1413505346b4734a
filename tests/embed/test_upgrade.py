"""`flask jobqueue upgrade`: the queue's tables in a host's database, under their own version table."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from dashboard import jobs
from dashboard.ops.schema import script_head
from tests.embed.host import make_host


@pytest.fixture
def host_database(database_url: str) -> Iterator[str]:
    """A fresh database on the test server, holding only the host's own migration record."""
    url = make_url(database_url)
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"host_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    fresh = url.set(database=name)
    with psycopg.connect(fresh.set(drivername="postgresql").render_as_string(hide_password=False)) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('host_rev_42')")
    yield fresh.render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def test_upgrade_keeps_its_own_version_table_and_leaves_the_host_s_alone(host_database: str) -> None:
    host, db, _ = make_host(host_database)
    runner = host.test_cli_runner()
    ran = runner.invoke(args=["jobqueue", "upgrade"])
    assert ran.exit_code == 0, ran.output
    assert "jobqueue_alembic_version" in ran.output
    with psycopg.connect(libpq(host_database)) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("host_rev_42",)]
        own = conn.execute("SELECT version_num FROM jobqueue_alembic_version").fetchall()
        assert own == [(script_head(),)]
        assert conn.execute("SELECT to_regclass('jobs_job') IS NOT NULL").fetchone() == (True,)
    again = runner.invoke(args=["jobqueue", "upgrade"])  # at head: nothing to do
    assert again.exit_code == 0, again.output
    with host.app_context():
        job = jobs.enqueue("demo.success", {"after": "upgrade"})
        assert job.created
        db.engine.dispose()


def test_the_worker_refuses_an_unmigrated_host_naming_the_command(host_database: str) -> None:
    host, db, _ = make_host(host_database)
    refused = host.test_cli_runner().invoke(args=["worker", "--threads", "1"])
    assert refused.exit_code != 0
    assert "flask --app HOST jobqueue upgrade" in refused.output
    with host.app_context():
        db.engine.dispose()


def test_the_host_s_readiness_reads_the_queue_s_version_table(host_database: str) -> None:
    host, db, _ = make_host(host_database)
    client = host.test_client()
    before = client.get("/ops/jobs/api/ready/")
    assert before.status_code == 503 and "jobqueue upgrade" in before.get_json()["reason"]
    assert host.test_cli_runner().invoke(args=["jobqueue", "upgrade"]).exit_code == 0
    assert client.get("/ops/jobs/api/ready/").status_code == 200
    with host.app_context():
        db.engine.dispose()
