"""Bringing the queue's tables to head: the standalone app's ``flask db upgrade`` path (and
its migration at start), and a host's ``flask jobqueue upgrade``.

Both run the same scripts (``migrations/``) one process at a time, under one advisory lock.
A host's app keeps the queue's revision in its own version table
(``jobqueue_alembic_version``), so its own migrations and ``alembic_version`` are never
touched; the scripts only create ``jobs_*`` and ``auth_*`` objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

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


# Every table the queue's migrations create, and the version table of a host's mount.
QUEUE_TABLES = frozenset(
    {
        "jobs_job",
        "jobs_jobevent",
        "jobs_worker",
        "jobs_queue",
        "jobs_queue_rate",
        "jobs_queue_slot",
        "jobs_job_dependency",
        "jobs_job_waiting",
        "jobs_schedule",
        "jobs_audit",
        "auth_signin_failure",
        EMBEDDED_VERSION_TABLE,
    }
)
IncludeName = Callable[[str | None, str, Mapping[str, str | None]], bool]


def is_host_object(name: str | None, type_: str, parent_names: Mapping[str, str | None]) -> bool:
    """Alembic's ``include_name`` for a host's autogenerate: everything but the queue's tables
    (and what belongs to them)."""
    table = name if type_ == "table" else parent_names.get("table_name")
    return table not in QUEUE_TABLES


def hide_from_autogenerate(app: Flask) -> None:
    """Keep the queue's tables out of the host's ``flask db migrate``: they are not in the host's
    metadata, so Alembic would write a revision that drops them all.

    Flask-Migrate passes ``configure_args`` to ``context.configure`` in the host's ``env.py``;
    the queue's ``include_name`` joins them (beside one of the host's own, which still decides for
    its objects). The host may set up Flask-Migrate before or after the queue, so the filter is
    installed whenever an app context of this app is pushed (every ``flask db`` command runs in one).
    """
    from flask import appcontext_pushed

    def install(sender: Flask, **_: object) -> None:
        migrate = sender.extensions.get("migrate")
        if migrate is None:
            return
        args = migrate.configure_args
        host_rule: IncludeName | None = args.get("include_name")
        if getattr(host_rule, "jobqueue_filter", False):
            return

        def include_name(name: str | None, type_: str, parent_names: Mapping[str, str | None]) -> bool:
            if not is_host_object(name, type_, parent_names):
                return False
            return host_rule is None or host_rule(name, type_, parent_names)

        include_name.jobqueue_filter = True  # type: ignore[attr-defined]
        args["include_name"] = include_name

    appcontext_pushed.connect(install, app, weak=False)
