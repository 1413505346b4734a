"""One real PostgreSQL per test session, migrated with the real migrations.

``DATABASE_URL``, when set, names a server the suite may create a scratch database on;
otherwise an embedded server (pgserver) starts in a temporary folder and is deleted at the end.
Either way the tests run against a database of their own, built by ``flask db upgrade``'s code
path (``flask_migrate.upgrade``), so the migrations are tested too.

Isolation is committed data plus ``TRUNCATE`` before each test: many tests need several
connections (claim races, worker threads and processes, a live server for the browser), which
a rolled-back outer transaction cannot serve. ``test_isolation.py`` is the canary.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from flask import Flask
from sqlalchemy import text
from sqlalchemy.engine import URL, make_url

from dashboard import create_app, upgrade_database
from dashboard.database import ensure_runtime_dir, normalise_url
from dashboard.extensions import db
from dashboard.state import state_of
from dashboard.store.lifecycle import claim_form
from tests.support.open_access import OPEN_ACCESS
from tests.support.worker_mode import SECOND_RUN_BATCH_SIZE


def _admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    configured = os.environ.get("DATABASE_URL")
    if configured:
        yield normalise_url(configured)
        return
    os.environ.setdefault("XDG_RUNTIME_DIR", ensure_runtime_dir())
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pg") / "data", cleanup_mode="delete")
    yield normalise_url(server.get_uri())
    server.cleanup()


def _libpq(url: URL) -> str:
    """A libpq connection string for psycopg from a SQLAlchemy URL."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


# ``--batch-mode-too``: the tests that start real worker processes (marked ``process``, under
# these folders) run once more in batch mode, in the same session. Start-up and Ctrl-C start the
# whole stack in its default mode, which batch mode does not change.
BOTH_MODES = ("runtime", "ops")
ONE_MODE = ("test_startup.py", "test_ctrl_c.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--batch-mode-too",
        action="store_true",
        help="run the tests that start real workers (tests/runtime, tests/ops) in batch mode too",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not metafunc.config.getoption("batch_mode_too"):
        return
    path = metafunc.definition.path.relative_to(metafunc.config.rootpath)
    if (
        path.parts[:2] in {("tests", folder) for folder in BOTH_MODES}
        and path.name not in ONE_MODE
        and metafunc.definition.get_closest_marker("process") is not None
    ):
        metafunc.parametrize("worker_mode", ["one-job", "batch"], indirect=True)


@pytest.fixture(autouse=True)
def worker_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test's second run under ``--batch-mode-too`` starts its workers in batch mode
    (``tests/support/worker_mode.py``); any other test as ``TEST_WORKER_BATCH_SIZE`` says."""
    if getattr(request, "param", None) == "batch":
        monkeypatch.setenv("TEST_WORKER_BATCH_SIZE", SECOND_RUN_BATCH_SIZE)


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a fresh, empty database for this test session."""
    for admin in _admin_url(tmp_path_factory):
        admin_url = make_url(admin)
        name = f"jobqueue_test_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(_libpq(admin_url), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = admin_url.set(database=name)
        yield url.render_as_string(hide_password=False)
        with psycopg.connect(_libpq(admin_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def libpq_url(database_url: str) -> str:
    """The test database as a plain libpq URL, for subprocesses and raw psycopg."""
    return _libpq(make_url(database_url))


TEST_CONFIG = {
    "TESTING": True,
    "DEBUG": "false",
    "ENABLE_DEBUG_TOOLBAR": "false",
    **OPEN_ACCESS,
    "JOB_WORKER_THREADS": "8",
    "JOB_DEMO_HANDLERS": "true",  # off by default with DEBUG=false; the tests run demo jobs
}


@pytest.fixture(scope="session")
def app(database_url: str) -> Iterator[Flask]:
    app = create_app({**TEST_CONFIG, "DATABASE_URL": database_url, "AUTO_MIGRATE": "false"})
    upgrade_database(app)
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture(autouse=True)
def empty_tables_before_each_test(request: pytest.FixtureRequest) -> None:
    """Empty the queue tables (and the sign-in throttle's) before each test that uses the database."""
    if "app" not in request.fixturenames:
        return
    app: Flask = request.getfixturevalue("app")
    with app.app_context(), db.engine.begin() as conn:
        tables = (
            "jobs_jobevent, jobs_job, jobs_worker, jobs_audit, jobs_schedule, auth_signin_failure, "
            "jobs_queue_rate, jobs_queue_slot, jobs_queue, jobs_job_dependency, jobs_job_waiting"
        )
        conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY"))
    claim_form.DEFAULT.forget()  # what this process knew of the queues' limits was of those rows


@pytest.fixture
def strict_job_types(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app as if started with ``JOB_TYPES_STRICT=true``, for this test only."""
    import dataclasses

    settings = state_of(app).settings
    monkeypatch.setattr(state_of(app), "settings", dataclasses.replace(settings, job_types_strict=True))
