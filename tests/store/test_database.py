"""Where the engine points, and the embedded server shared by separate processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dashboard.config import Settings
from dashboard.database import normalise_url, resolve_url

ROOT = Path(__file__).resolve().parents[2]


def test_database_url_wins_and_is_pointed_at_psycopg(tmp_path):
    settings = Settings.from_env({"DATABASE_URL": "postgresql://u:p@db:5432/q", "POSTGRES_HOST": "x"})
    assert resolve_url(settings, str(tmp_path)) == ("postgresql+psycopg://u:p@db:5432/q", False)
    assert normalise_url("postgres://h/d") == "postgresql+psycopg://h/d"
    assert normalise_url("postgresql+psycopg://h/d") == "postgresql+psycopg://h/d"
    assert not (tmp_path / "pgdata").exists()  # nothing was started


@pytest.mark.parametrize(
    ("given", "normalised"),
    [
        (  # libpq's form, as RDS and Patroni hand it out
            "postgresql://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write",
            "postgresql+psycopg://u:p@/db?host=h1,h2&port=5432,5433&target_session_attrs=read-write",
        ),
        (  # SQLAlchemy's repeated host
            "postgresql+psycopg://u@/db?host=h1:5432&host=h2:5433&target_session_attrs=read-write",
            "postgresql+psycopg://u@/db?host=h1,h2&port=5432,5433&target_session_attrs=read-write",
        ),
        ("postgresql://u@h1,h2:5433/db", "postgresql+psycopg://u@/db?host=h1,h2&port=,5433"),  # h1: default
        ("postgresql://u@[::1]:5432,[::2]:5433/db", "postgresql+psycopg://u@/db?host=::1,::2&port=5432,5433"),
        ("postgresql://u@%2Ftmp%2Fa,%2Ftmp%2Fb/db", "postgresql+psycopg://u@/db?host=/tmp/a,/tmp/b"),
        ("postgresql://u@/db?host=h1,h2&port=1,2", "postgresql+psycopg://u@/db?host=h1,h2&port=1,2"),
        ("postgres://u:p@db:5432/q", "postgresql+psycopg://u:p@db:5432/q"),  # one host: as it is
    ],
)
def test_several_hosts_become_one_form_that_sqlalchemy_and_libpq_both_read(given, normalised):
    from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
    from sqlalchemy.engine import make_url

    assert normalise_url(given) == normalised
    url = make_url(normalised)
    args = PGDialect_psycopg().create_connect_args(url)[1]  # what SQLAlchemy hands psycopg
    if "," in normalised:
        assert args["host"] == url.query["host"]
    libpq = url.set(drivername="postgresql").render_as_string(hide_password=False)  # the LISTEN's
    import psycopg.conninfo

    assert psycopg.conninfo.conninfo_to_dict(libpq)["host"] == args["host"]


def test_postgres_variables_are_used_when_postgres_host_is_set(tmp_path):
    settings = Settings.from_env(
        {
            "POSTGRES_HOST": "db.internal",
            "POSTGRES_PASSWORD": "p@ss/word",
            "POSTGRES_PORT": "6543",
        }
    )
    url, embedded = resolve_url(settings, str(tmp_path))
    assert url == "postgresql+psycopg://postgres:p%40ss%2Fword@db.internal:6543/job_queue"
    assert embedded is False


SCRIPT = textwrap.dedent(
    """
    import json, sys
    from dashboard import create_app
    from dashboard.store.lifecycle import create as enqueue
    from dashboard.store.reads import jobs as read_jobs, lists as find_jobs
    app = create_app({"ENABLE_DEBUG_TOOLBAR": "false"})
    with app.app_context():
        if sys.argv[1] == "create":
            job = enqueue.create_job(enqueue.JobSpec("demo.success", idempotency_key="shared")).job
        else:
            job = read_jobs.get_job(find_jobs.list_jobs(limit=1, offset=0).results[0].id)
        print(json.dumps({"id": str(job.id), "embedded": app.config["EMBEDDED_DATABASE"]}))
    """
)


@pytest.mark.process
def test_embedded_server_is_started_migrated_and_shared_by_processes(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "POSTGRES_HOST"}}
    env["INSTANCE_PATH"] = str(tmp_path / "instance")

    def run(mode: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, mode],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    try:
        first = run("create")
        second = run("read")
        assert '"embedded": true' in first
        assert first == second  # the second process found the first one's job
        assert (tmp_path / "instance" / "pgdata" / "PG_VERSION").exists()
        # the last process to exit stopped the server
        assert not (tmp_path / "instance" / "pgdata" / "postmaster.pid").exists()
    finally:
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import pgserver, sys; pgserver.get_server(sys.argv[1]).cleanup()",
                str(tmp_path / "instance" / "pgdata"),
            ],
            env=env,
            capture_output=True,
            timeout=60,
        )


def terminate(libpq_url: str, pid: int) -> None:
    """End the server session ``pid`` and wait until it is gone."""
    import psycopg

    from tests.support.waiting import wait_until

    with psycopg.connect(libpq_url, autocommit=True) as killer:
        assert killer.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
        gone = "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)"
        wait_until(lambda: killer.execute(gone, (pid,)).fetchone()[0], 15, "the session to end")


def test_a_pooled_connection_killed_while_idle_is_replaced_at_checkout(app, libpq_url, monkeypatch):
    """No pre-ping on every checkout: a connection idle long enough (or pooled before some
    connection failed) is pinged first, and a dead one is replaced, not handed out."""
    from sqlalchemy import text

    from dashboard import database
    from dashboard.extensions import db

    with app.app_context():
        with db.engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        terminate(libpq_url, pid)
        # Not idle long, no failure seen: the terminated session's socket gives it away.
        with db.engine.connect() as conn:
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar() != pid
        monkeypatch.setattr(database, "PING_AFTER_IDLE_SECONDS", 0.0)
        with db.engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1


def test_a_worker_connection_that_dies_before_its_plan_setting_fails_as_a_connection_error(
    app, libpq_url, monkeypatch
):
    """A one-job thread's connection is set to generic plans right after the checkout. If the
    session is gone by then (killed in the pool, cut by a reset), the failure comes back as
    SQLAlchemy's connection error, which the worker's writes retry through, never as psycopg's
    own class, which a handler's lease renewal would take for the handler's error; and the dead
    connection is not handed out again."""
    import psycopg
    from sqlalchemy import exc as sa_exc
    from sqlalchemy import text

    from dashboard.runtime.failures import is_connection_error
    from dashboard.store import connection

    real_connect = connection.connect
    killed: list[int] = []

    def connect_then_die():
        conn = real_connect()
        pid = connection.raw_connection(conn).info.backend_pid  # no statement on the connection
        terminate(libpq_url, pid)
        killed.append(pid)
        return conn

    with app.app_context():
        monkeypatch.setattr(connection, "connect", connect_then_die)
        with pytest.raises(sa_exc.OperationalError) as raised:
            connection.connect_worker()
        assert is_connection_error(raised.value)
        assert isinstance(raised.value.orig, psycopg.OperationalError)
        monkeypatch.setattr(connection, "connect", real_connect)
        conn = connection.connect_worker()
        try:
            assert connection.raw_connection(conn).info.backend_pid not in killed
            assert conn.execute(text("SHOW plan_cache_mode")).scalar() == "force_generic_plan"
        finally:
            connection.release_worker(conn)


def test_a_store_connection_goes_back_to_the_pool_in_the_drivers_default_mode(app, libpq_url):
    """The store's autocommit connections switch the driver's own flag (no SQLAlchemy isolation
    level per checkout) and switch it back at check-in: the next borrower of that connection, a
    SQLAlchemy transaction here, gets a transaction, and its rollback undoes its write."""
    import psycopg
    from sqlalchemy import text

    from dashboard.extensions import db
    from dashboard.store import connection

    with app.app_context():
        with connection.connect() as conn:
            raw = connection.raw_connection(conn)
            pid = raw.info.backend_pid
            assert raw.autocommit and connection.autocommits(conn)
        assert raw.autocommit is False
        held = []  # keep the others checked out until the store's connection comes back
        try:
            for _ in range(db.engine.pool.size() + 2):
                borrowed = db.engine.connect()
                if connection.raw_connection(borrowed).info.backend_pid == pid:
                    break
                held.append(borrowed)
            else:
                pytest.fail("the store's connection did not come back from the pool")
            with pytest.raises(RuntimeError, match="undo"), borrowed.begin():
                borrowed.execute(text("CREATE TABLE autocommit_probe (n int)"))
                raise RuntimeError("undo")
            borrowed.close()
        finally:
            for other in held:
                other.close()
    with psycopg.connect(libpq_url) as check:
        assert check.execute("SELECT to_regclass('autocommit_probe')").fetchone()[0] is None
