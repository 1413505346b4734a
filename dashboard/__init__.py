"""The application factory: configuration, extensions, blueprints and CLI commands."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import Flask
from sqlalchemy import text

from . import limits
from .config import ConfigError, Settings
from .database import MIGRATION_LOCK_KEY, engine_options, resolve_url
from .extensions import csrf, db, htmx, migrate
from .store import jsonb

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
    # Keys that are also settings keep their parsed value (``"false"`` is not a true DEBUG).
    app.config.update(DEBUG=settings.debug, SECRET_KEY=settings.secret_key)
    app.extensions["jobqueue.settings"] = settings
    refuse_unsafe_production(app, settings)
    debug_toolbar = settings.debug and settings.enable_debug_toolbar and not app.testing

    db.init_app(app)
    jsonb.install()
    migrate.init_app(app, db, directory=MIGRATIONS_DIR)
    csrf.init_app(app)
    htmx.init_app(app)

    from . import api, auth, cli, web
    from .runtime.handlers import load_handler_modules
    from .store import models  # noqa: F401  (registers the tables on db.metadata)

    app.register_blueprint(api.bp, url_prefix="/api")
    app.register_blueprint(web.bp)
    app.context_processor(lambda: {"limits": limits})  # templates read the shared value rules
    cli.init_app(app)
    auth.init_app(app, settings, debug_toolbar=debug_toolbar)
    load_handler_modules(settings.worker.handler_modules)

    auto_migrate = app.config.get("AUTO_MIGRATE", env.get("AUTO_MIGRATE"))
    if (embedded and auto_migrate is None) or str(auto_migrate).lower() in {"1", "true", "yes"}:
        upgrade_database(app)
    if debug_toolbar:
        _init_debug_toolbar(app, settings)
    return app


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


def upgrade_database(app: Flask) -> None:
    """Apply migrations, one process at a time (web and worker may start together)."""
    from flask_migrate import upgrade

    with app.app_context(), db.engine.connect() as conn:
        # A session-level lock taken in autocommit: a transaction left open here would make
        # CREATE INDEX CONCURRENTLY in a migration wait for it forever.
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        try:
            upgrade(directory=MIGRATIONS_DIR)
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})


def _init_debug_toolbar(app: Flask, settings: Settings) -> None:
    from flask_debugtoolbar import DebugToolbarExtension

    app.config.setdefault("DEBUG_TB_INTERCEPT_REDIRECTS", False)
    app.config.setdefault("DEBUG_TB_HOSTS", list(settings.internal_ips))
    DebugToolbarExtension(app)

    @app.after_request
    def _toolbar_starts_collapsed(response):  # type: ignore[no-untyped-def]
        # Flask-DebugToolbar has no setting for this; its toolbar.js hides itself while the
        # ``fldt`` cookie is set. Set it once per browser; the toolbar's handle reopens it.
        from flask import request

        if "fldt" not in request.cookies and "fldt_seen" not in request.cookies:
            response.set_cookie("fldt", "hide", path="/", samesite="Lax")
            response.set_cookie("fldt_seen", "1", path="/", samesite="Lax", max_age=86400 * 365)
        return response
