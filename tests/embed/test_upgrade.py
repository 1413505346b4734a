"""`flask jobqueue upgrade`: the queue's tables in a host's database, under their own version table."""

from __future__ import annotations

import logging.config
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from flask_migrate import Migrate
from flask_migrate import init as migrate_init
from flask_migrate import migrate as migrate_revision
from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from dashboard import jobs
from dashboard.migrating import QUEUE_TABLES
from dashboard.ops.schema import script_head
from tests.embed.host import make_host


def fresh_database(database_url: str) -> Iterator[str]:
    """A fresh, empty database on the test server."""
    url = make_url(database_url)
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"host_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield url.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def host_database(database_url: str) -> Iterator[str]:
    """A fresh database on the test server, holding only the host's own migration record."""
    for fresh in fresh_database(database_url):
        with psycopg.connect(libpq(fresh)) as conn:
            conn.execute("CREATE TABLE alembic_version (version_num varchar(32) PRIMARY KEY)")
            conn.execute("INSERT INTO alembic_version VALUES ('host_rev_42')")
        yield fresh


@pytest.fixture
def empty_database(database_url: str) -> Iterator[str]:
    yield from fresh_database(database_url)


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
    signed_in = {"X-Host-Role": "viewer"}  # the host's own yes (or a token) opens it in a mount
    before = client.get("/ops/jobs/api/ready/", headers=signed_in)
    assert before.status_code == 503 and "jobqueue upgrade" in before.get_json()["reason"]
    assert host.test_cli_runner().invoke(args=["jobqueue", "upgrade"]).exit_code == 0
    assert client.get("/ops/jobs/api/ready/", headers=signed_in).status_code == 200
    with host.app_context():
        db.engine.dispose()


# Flask-Migrate's own env.py template tries Flask-SQLAlchemy's deprecated get_engine() first.
@pytest.mark.filterwarnings("ignore:'get_engine' is deprecated:DeprecationWarning")
def test_the_host_s_autogenerate_finds_nothing_of_the_queue(
    empty_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's own ``flask db migrate`` after ``flask jobqueue upgrade``: the queue's tables
    are not in the host's metadata, and the revision it writes must not drop them."""
    # The env.py that `flask db init` writes calls logging.config.fileConfig, which disables
    # every logger this test process already has: the later tests' log lines would vanish.
    monkeypatch.setattr(logging.config, "fileConfig", lambda *args, **kwargs: None)
    host, db, _ = make_host(empty_database)
    Migrate(host, db)  # set up after the queue: the filter is installed all the same
    upgraded = host.test_cli_runner().invoke(args=["jobqueue", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    directory = str(tmp_path / "migrations")
    with host.app_context():
        migrate_init(directory)
        migrate_revision(directory, message="the shop's first")
        tables = set(inspect(db.engine).get_table_names())
    [revision] = (tmp_path / "migrations" / "versions").glob("*.py")
    script = revision.read_text()
    assert 'op.create_table("shop_order"' in script or "op.create_table('shop_order'" in script, script
    upgrade = script[script.index("def upgrade") : script.index("def downgrade")]
    assert "drop_table" not in upgrade and "jobs_" not in script, script
    queue_tables = tables - {"shop_order", "alembic_version"}
    assert queue_tables == QUEUE_TABLES  # the filter names every table the migrations made
    with host.app_context():
        db.engine.dispose()
