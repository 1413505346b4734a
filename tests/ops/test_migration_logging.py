"""Migrating at start leaves the process's logging alone (``migrations/env.py``).

A web process on the embedded database (or with ``AUTO_MIGRATE``) runs the migrations inside
``create_app``. Alembic's own logging set-up used to replace the root logger's handlers then:
with ``LOG_FORMAT=json`` the app's lines came out as text, and in text mode every warning was
written twice, once unescaped. And in text mode a successful sign-in (an INFO line) was never
written at all. Each test builds the app as such a process does, reading what it writes to
stderr.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from dashboard import create_app
from dashboard.extensions import db
from tests.conftest import TEST_CONFIG
from tests.support.secured import build, sign_in

TOUCHED = ("dashboard", "sqlalchemy", "sqlalchemy.engine", "alembic", "flask_migrate")


@contextmanager
def as_a_new_process() -> Iterator[None]:
    """Logging as a new process has it: no root handler (pytest's own are put aside), nothing
    set by earlier tests; all restored afterwards. Used inside a test's body, after pytest has
    added its handlers for that phase."""
    from flask.logging import default_handler

    root = logging.getLogger()
    saved_root = (list(root.handlers), root.level)
    saved = {}
    for name in TOUCHED:
        logger = logging.getLogger(name)
        saved[name] = (logger.level, list(logger.handlers), logger.propagate)
    root.handlers.clear()
    root.setLevel(logging.WARNING)
    for name in TOUCHED:
        logger = logging.getLogger(name)
        logger.setLevel(logging.NOTSET)
        logger.handlers.clear()
        logger.propagate = True
    logging.getLogger("dashboard").removeHandler(default_handler)
    try:
        yield
    finally:
        root.handlers[:] = saved_root[0]
        root.setLevel(saved_root[1])
        for name, (level, handlers, propagate) in saved.items():
            logger = logging.getLogger(name)
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate = propagate


def started(database_url: str, log_format: str):
    """The app as a web process builds it when it migrates at start."""
    return create_app(
        {**TEST_CONFIG, "DATABASE_URL": database_url, "AUTO_MIGRATE": "true", "LOG_FORMAT": log_format}
    )


def test_json_lines_stay_json_after_the_migration(database_url, capfd):
    with as_a_new_process():
        app = started(database_url, "json")
        try:
            app.logger.warning("written after the migration")
            logging.getLogger("dashboard.runtime.worker").info("a project line at INFO")
            lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
        finally:
            with app.app_context():
                db.engine.dispose()
    parsed = [json.loads(line) for line in lines]  # every line one JSON object
    messages = {entry["message"]: entry for entry in parsed}
    assert messages["written after the migration"]["level"] == "WARNING"
    assert "a project line at INFO" in messages
    assert any(entry["logger"].startswith("alembic") for entry in parsed)  # the migration's own, as JSON


def test_text_mode_writes_each_warning_once_and_escaped(database_url, capfd):
    with as_a_new_process():
        app = started(database_url, "text")
        try:
            migration = capfd.readouterr().err
            app.logger.warning("disk %s", "nearly\nfull")
            err = capfd.readouterr().err
        finally:
            with app.app_context():
                db.engine.dispose()
        again = started(database_url, "text")  # a second migration adds no second handler
        try:
            second = capfd.readouterr().err
        finally:
            with again.app_context():
                db.engine.dispose()
    assert err.count("disk nearly") == 1
    assert "disk nearly\\nfull" in err  # one line: the newline escaped
    assert migration.count("Context impl") == 1  # the migration still says what it does, once
    assert second.count("Context impl") == 1


def test_a_successful_sign_in_is_written_in_text_mode(database_url, capfd):
    with as_a_new_process(), build(database_url, LOG_FORMAT="text") as app:
        client = app.test_client()
        capfd.readouterr()
        assert sign_in(client, "olga").status_code == 303
        err = capfd.readouterr().err
    assert "Signed in: olga (operator)" in err
