"""The application factory: configuration, extensions, blueprints and CLI commands."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from flask import Flask
from sqlalchemy import text

from . import limits
from .auth.principals import Directory
from .config import PROJECT_ROOT, ConfigError, Settings
from .database import (
    MIGRATION_LOCK_KEY,
    MIGRATIONS_DIR,
    engine_options,
    ping_when_suspect,
    resolve_url,
)
from .extensions import csrf, db, htmx, migrate
from .ops.setup import init_app as init_ops
from .store import jsonb
from .store.states import ACTIVITY_EVENTS


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Build the app.

    ``config`` overrides the environment: keys named like environment variables
    (``DATABASE_URL``, ``JOB_WORKER_THREADS``, ``AUTO_MIGRATE``, ...) feed :class:`Settings`;
    every key is also set on ``app.config`` (``TESTING``, ``WTF_CSRF_ENABLED``, ...).
    A malformed setting, users and tokens included, raises :class:`ConfigError` first.
    """
    overrides = dict(config or {})
    env = {**os.environ, **{k: str(v) for k, v in overrides.items() if isinstance(v, str | int | float)}}
    settings = Settings.from_env(env)
    directory = Directory(settings)  # the users and tokens parsed and checked (auth/credentials.py)

    app = Flask(
        __name__,
        template_folder=os.path.join(PROJECT_ROOT, "templates"),
        static_folder=os.path.join(PROJECT_ROOT, "static"),
        instance_path=settings.instance_path,
    )
    url, embedded = resolve_url(settings, app.instance_path)
    app.config.from_mapping(
        DEBUG=settings.debug,
        SECRET_KEY=settings.secret_key,
        SQLALCHEMY_DATABASE_URI=url,
        SQLALCHEMY_ENGINE_OPTIONS=engine_options(settings),
        MAX_CONTENT_LENGTH=settings.max_content_length,
        TRUSTED_HOSTS=None if "*" in settings.allowed_hosts else list(settings.allowed_hosts),
        JSON_SORT_KEYS=False,
        EMBEDDED_DATABASE=embedded,
    )
    app.config.update(overrides)
    # Keys that are also settings keep their parsed value (``"false"`` is not a true DEBUG).
    app.config.update(DEBUG=settings.debug, SECRET_KEY=settings.secret_key)
    app.extensions["jobqueue.settings"] = settings
    _escape_logged_values()
    init_ops(app, settings)  # log format first, request ids, the metrics collector, flask prune
    refuse_unsafe_production(app, settings)
    warn_debug_with_credentials(app, settings)
    # Never with a credential configured: the toolbar is for a local, open development start.
    debug_toolbar = (
        settings.debug
        and settings.enable_debug_toolbar
        and not settings.has_credentials
        and not app.config.get("TESTING")
    )

    db.init_app(app)
    with app.app_context():
        ping_when_suspect(db.engine)
    jsonb.install()
    migrate.init_app(app, db, directory=MIGRATIONS_DIR)
    csrf.init_app(app)
    htmx.init_app(app)

    from . import api, auth, cli, web
    from .paths import API_PREFIX
    from .runtime.handlers import DEMO_SWITCH, load_handler_modules
    from .store import models  # noqa: F401  (registers the tables on db.metadata)

    app.register_blueprint(api.bp, url_prefix=API_PREFIX)
    app.register_blueprint(web.bp)
    web.metrics.init_app(app)  # GET /metrics, at the root beside the blueprints
    # Templates read the shared value rules and the event types of an attempt's activity.
    app.context_processor(lambda: {"limits": limits, "activity_events": ACTIVITY_EVENTS})
    cli.init_app(app)
    auth.init_app(app, settings, directory, debug_toolbar=debug_toolbar)
    app.extensions[DEMO_SWITCH] = settings.worker.demo_handlers
    load_handler_modules(settings.worker.handler_modules)

    if settings.migrates_at_start:
        upgrade_database(app)
    if debug_toolbar:
        _init_debug_toolbar(app, settings)
    return app


def _escape_logged_values() -> None:
    """The app logger's handler (the web process's log) escapes control characters in
    messages, as the worker's does (:mod:`.logsafe`)."""
    from flask.logging import default_handler

    from .logsafe import SafeFormatter

    if not isinstance(default_handler.formatter, SafeFormatter):
        default_handler.setFormatter(SafeFormatter("[%(asctime)s] %(levelname)s in %(module)s: %(message)s"))


def refuse_unsafe_production(app: Flask, settings: Settings) -> None:
    """In production (``DEBUG=false``), refuse to serve without a real ``SECRET_KEY`` and a
    credential (or ``AUTH_DISABLED=true``), saying exactly what to set.

    Serving (gunicorn, any WSGI server) raises :class:`ConfigError` here, so the server does
    not start. Under the ``flask`` command line the app is also built for commands that serve
    nothing (``worker``, ``db upgrade``, ``hash-password``): there the refusal is logged and
    every request answers 503 with it, so ``flask run`` cannot serve an open dashboard either.
    """
    problems = settings.production_problems()
    if not problems:
        return
    message = "Refusing to serve with DEBUG=false: " + "; and ".join(problems) + "."
    if os.environ.get("FLASK_RUN_FROM_CLI") != "true":
        raise ConfigError(message)
    app.logger.warning("%s (commands other than serving are unaffected)", message)

    @app.before_request
    def refuse() -> tuple[str, int, dict[str, str]]:
        return message + "\n", 503, {"Content-Type": "text/plain; charset=utf-8"}


def warn_debug_with_credentials(app: Flask, settings: Settings) -> None:
    """Users or tokens with ``DEBUG`` on: a deployment that forgot ``DEBUG=false`` (the
    production checks are skipped). Said loudly at start; the debug toolbar stays off."""
    if settings.debug and settings.has_credentials:
        app.logger.warning(
            "!!! DEBUG is true (the default) while dashboard users or API tokens are configured: "
            "this looks like a production deployment running in development mode. The production "
            "checks (SECRET_KEY, ...) are skipped. Set DEBUG=false. The debug toolbar stays off. !!!"
        )


MIGRATION_LOCK_POLL_SECONDS = 0.1


def upgrade_database(app: Flask) -> None:
    """Apply migrations, one process at a time (web and worker processes may start together).

    The lock is a session-level advisory lock, *polled* with ``pg_try_advisory_lock`` on an
    autocommit connection, sleeping between tries with no statement and no transaction open.
    A waiting process therefore holds no snapshot: a ``CREATE INDEX CONCURRENTLY`` run by the
    process holding the lock (migration 0004) waits for every open transaction, and a process
    blocked inside ``SELECT pg_advisory_lock(...)`` is one, so the two waited for each other
    forever, through the client, where PostgreSQL's deadlock detector cannot see it.
    Every waiter then runs the upgrade itself, which finds the schema at head and does nothing.
    """
    from flask_migrate import upgrade

    with app.app_context(), db.engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        try_lock = text("SELECT pg_try_advisory_lock(:key)")
        waited = False
        while not conn.execute(try_lock, {"key": MIGRATION_LOCK_KEY}).scalar():
            if not waited:
                app.logger.info("another process is migrating the database; waiting for it")
                waited = True
            time.sleep(MIGRATION_LOCK_POLL_SECONDS)
        try:
            upgrade(directory=MIGRATIONS_DIR)
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})


def _init_debug_toolbar(app: Flask, settings: Settings) -> None:
    from .debugbar import init_toolbar

    init_toolbar(app, settings)
