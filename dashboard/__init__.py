"""The application factory: configuration, extensions, blueprints and CLI commands."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import Flask
from sqlalchemy import text

from .config import Settings
from .database import MIGRATION_LOCK_KEY, engine_options, resolve_url
from .extensions import csrf, db, migrate

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIGRATIONS_DIR = os.path.join(PROJECT_ROOT, "migrations")


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Build the app.

    ``config`` overrides the environment: keys named like environment variables
    (``DATABASE_URL``, ``JOB_WORKER_THREADS``, ...) feed :class:`Settings`; every key is also
    set on ``app.config`` (``TESTING``, ``WTF_CSRF_ENABLED``, ...).
    """
    overrides = dict(config or {})
    env = {**os.environ, **{k: str(v) for k, v in overrides.items() if isinstance(v, str | int | float)}}
    settings = Settings.from_env(env)

    app = Flask(
        __name__,
        template_folder=os.path.join(PROJECT_ROOT, "templates"),
        static_folder=os.path.join(PROJECT_ROOT, "static"),
        instance_path=os.environ.get("INSTANCE_PATH") or os.path.join(PROJECT_ROOT, "instance"),
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
    app.extensions["jobqueue.settings"] = settings

    db.init_app(app)
    migrate.init_app(app, db, directory=MIGRATIONS_DIR)
    csrf.init_app(app)

    from . import api, cli, web
    from .queue import models  # noqa: F401  (registers the tables on db.metadata)
    from .queue.handlers import load_handler_modules

    app.register_blueprint(api.bp, url_prefix="/api")
    app.register_blueprint(web.bp)
    cli.init_app(app)
    load_handler_modules(settings.worker.handler_modules)

    auto_migrate = app.config.get("AUTO_MIGRATE", env.get("AUTO_MIGRATE"))
    if (embedded and auto_migrate is None) or str(auto_migrate).lower() in {"1", "true", "yes"}:
        upgrade_database(app)
    if settings.debug and settings.enable_debug_toolbar and not app.testing:
        _init_debug_toolbar(app, settings)
    return app


def settings_of(app: Flask) -> Settings:
    """The :class:`Settings` the app was built with."""
    return app.extensions["jobqueue.settings"]


def upgrade_database(app: Flask) -> None:
    """Apply migrations, one process at a time (web and worker may start together)."""
    from flask_migrate import upgrade

    with app.app_context(), db.engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        try:
            upgrade(directory=MIGRATIONS_DIR)
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
            conn.commit()


def _init_debug_toolbar(app: Flask, settings: Settings) -> None:
    from flask_debugtoolbar import DebugToolbarExtension

    app.config.setdefault("DEBUG_TB_INTERCEPT_REDIRECTS", False)
    app.config.setdefault("DEBUG_TB_HOSTS", list(settings.internal_ips))
    DebugToolbarExtension(app)
