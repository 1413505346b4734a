"""Start-up never deadlocks: web and worker processes started together migrate the
database once and all come up, on an empty embedded database and on an older schema."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.support.stack import (
    BIN,
    ROOT,
    Started,
    flask_worker,
    free_port,
    gunicorn,
    healthy,
    kill_leftovers,
    nothing_left,
    postmaster_running,
    run_job,
    stack_env,
)
from tests.support.waiting import wait_until

# The newest migration (revision ids are the file names' four-digit prefixes).
HEAD_REVISION = max(
    path.name[:4] for path in (ROOT / "migrations" / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")
)

pytestmark = pytest.mark.process

ROUNDS = 5


def start_together_and_use(env: dict[str, str], logs: Path, name: str) -> None:
    """gunicorn -w 2 and a flask worker at the same moment; health within 30 s; a demo.success
    job created through the API succeeds (within a minute: only the health check has a bound
    of its own, and a loaded 2-core machine is slow to start the worker); then both stop (SIGTERM)
    and exit. A failure shows the tail of both processes' output."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = gunicorn(port, env, logs / f"{name}-web.log")
    worker = flask_worker(env, logs / f"{name}-worker.log")
    try:
        try:
            wait_until(lambda: healthy(base), 30, f"{name}: /api/health/ to answer")
        except AssertionError:
            logs_tail = f"{web.output[-3000:]}\n{worker.output[-3000:]}"
            raise AssertionError(f"{name}: no health in 30 s\n{logs_tail}") from None
        try:
            run_job(base, "demo.success", {"sleep_seconds": 0}, ("succeeded",), 60)
        except AssertionError as error:
            logs_tail = f"{web.output[-3000:]}\n{worker.output[-3000:]}"
            raise AssertionError(f"{name}: {error}\n{logs_tail}") from None
        for process in (web, worker):
            process.signal_group(signal.SIGTERM)
        for process in (web, worker):
            process.wait(20)
    finally:
        web.stop()
        worker.stop()


def test_web_and_worker_start_together_on_an_empty_embedded_database(tmp_path):
    for n in range(1, ROUNDS + 1):
        instance = tmp_path / f"instance-{n}"  # empty: created by the processes themselves
        env = stack_env(INSTANCE_PATH=str(instance))
        try:
            start_together_and_use(env, tmp_path, f"round-{n}")
            nothing_left(instance, 15)  # the last process stopped the embedded server
        finally:
            kill_leftovers(instance)


def test_web_and_worker_start_together_on_a_database_at_revision_0003_with_rows(tmp_path, libpq_url):
    """``DATABASE_URL`` with ``AUTO_MIGRATE=true``: every process migrates on start, and 0004
    builds its index CONCURRENTLY (the table holds more rows than the plain-index threshold)."""
    name = f"jobqueue_old_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(libpq_url).set(database=name).render_as_string(hide_password=False)
    env = stack_env(DATABASE_URL=url, AUTO_MIGRATE="false", INSTANCE_PATH=str(tmp_path / "instance"))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "flask", "--app", "wsgi", "db", "upgrade", "0003"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                """
                INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts,
                                      max_attempts, last_error, created_at, updated_at, finished_at)
                SELECT gen_random_uuid(), 'demo.success', '{}', 'succeeded', 50, now(), 1, 3, '',
                       now(), now(), now()
                FROM generate_series(1, 12000)
                """
            )
            assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == ("0003",)
        start_together_and_use({**env, "AUTO_MIGRATE": "true"}, tmp_path, "at-0003")
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD_REVISION,)
            valid = conn.execute(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = 'job_type_created_idx'"
            ).fetchone()
            assert valid == (True,)
            created = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname LIKE 'jobs_job_created_at%'"
            ).fetchall()  # rebuilt concurrently under its own name, the building one gone
            assert [row[0].split(" USING ")[1] for row in created] == ["btree (created_at, id)"]
            assert conn.execute("SELECT count(*) FROM jobs_job").fetchone() == (12001,)
    finally:
        with psycopg.connect(libpq_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_development_server_stopped_by_sigterm_stops_the_embedded_database(tmp_path):
    """``flask run`` has no SIGTERM handler of its own (gunicorn and ``flask worker`` do): an IDE's
    stop button or ``kill`` must still end it through its exit handlers, so that the last process
    attached to the embedded server stops it instead of leaving PostgreSQL running."""
    instance = tmp_path / "instance"
    env = stack_env(INSTANCE_PATH=str(instance))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = Started(
        [str(BIN / "flask"), "--app", "wsgi", "run", "--port", str(port)], env, tmp_path / "run.log"
    )
    try:
        wait_until(lambda: healthy(base), 60, "flask run to answer /api/health/")
        assert postmaster_running(instance)
        web.proc.send_signal(signal.SIGTERM)  # the process only, as `kill <pid>` does
        web.wait(20)
        nothing_left(instance, 15)
    finally:
        web.stop()
        kill_leftovers(instance)
