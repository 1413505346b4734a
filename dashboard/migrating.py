"""Bringing the queue's tables to head: the standalone app's ``flask db upgrade`` path (and
its migration at start), and a host's ``flask jobqueue upgrade``.

Both run the same scripts (``migrations/``) one process at a time, under one advisory lock.
A host's app keeps the queue's revision in its own version table
(``jobqueue_alembic_version``), so its own migrations and ``alembic_version`` are never
touched; the scripts only create ``jobs_*`` and ``auth_*`` objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from flask import Flask
from sqlalchemy import text

from .database import MIGRATION_LOCK_KEY, MIGRATIONS_DIR
from .extensions import engine
from .mount import EMBEDDED_VERSION_TABLE

MIGRATION_LOCK_POLL_SECONDS = 0.1


def upgrade_database(app: Flask) -> None:
    """Apply migrations through Flask-Migrate (the standalone app), one process at a time."""
    from flask_migrate import upgrade

    with_migration_lock(app, lambda: upgrade(directory=MIGRATIONS_DIR))


def upgrade_embedded(app: Flask, revision: str = "head") -> None:
    """Apply the queue's migrations in a host's database (``flask jobqueue upgrade``), its
    revision kept in ``jobqueue_alembic_version``; Flask-Migrate and the host's own
    ``alembic_version`` are left alone."""
    from alembic import command
    from alembic.config import Config

    def run() -> None:
        config = Config()
        config.set_main_option("script_location", MIGRATIONS_DIR)
        config.attributes["jobqueue_engine"] = engine()
        config.attributes["jobqueue_version_table"] = EMBEDDED_VERSION_TABLE
        command.upgrade(config, revision)

    with_migration_lock(app, run)


def with_migration_lock(app: Flask, run: Callable[[], None]) -> None:
    """``run()`` while holding the migration lock (web and worker processes may start together).

    The lock is a session-level advisory lock, *polled* with ``pg_try_advisory_lock`` on an
    autocommit connection, sleeping between tries with no statement and no transaction open.
    A waiting process therefore holds no snapshot: a ``CREATE INDEX CONCURRENTLY`` run by the
    process holding the lock (migration 0004) waits for every open transaction, and a process
    blocked inside ``SELECT pg_advisory_lock(...)`` is one, so the two waited for each other
    forever, through the client, where PostgreSQL's deadlock detector cannot see it.
    Every waiter then runs the upgrade itself, which finds the schema at head and does nothing.
    """
    with app.app_context(), engine().connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        try_lock = text("SELECT pg_try_advisory_lock(:key)")
        waited = False
        while not conn.execute(try_lock, {"key": MIGRATION_LOCK_KEY}).scalar():
            if not waited:
                app.logger.info("another process is migrating the database; waiting for it")
                waited = True
            time.sleep(MIGRATION_LOCK_POLL_SECONDS)
        try:
            run()
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
