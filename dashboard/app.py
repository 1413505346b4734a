"""The standalone app: :func:`create_app` builds the queue's own Flask app (``wsgi.py``, the
``Procfile``), with its sign-in, production checks and debug toolbar, and mounts
:class:`~dashboard.extension.JobQueue` at the root."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import Flask

from .auth import init_app as init_auth
from .auth.principals import Directory
from .config import ConfigError, Settings
from .database import (
    MIGRATIONS_DIR,
    STATIC_DIR,
    TEMPLATES_DIR,
    engine_options,
    ping_when_suspect,
    resolve_url,
)
from .extension import JobQueue
from .extensions import csrf, db, htmx, migrate
from .migrating import upgrade_database
from .mount import EXTENSION
from .ops.setup import init_app as init_ops
from .state import QueueState
from .store import jsonb

__all__ = ["create_app"]


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
        "dashboard",  # the app's name and its logger's: the package's, as before the factory had a module
        template_folder=TEMPLATES_DIR,
        static_folder=STATIC_DIR,
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
    app.extensions[EXTENSION] = QueueState(settings)
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

    # The standalone app is the queue's first host: mounted at the root, with its own sign-in.
    JobQueue().init_app(app, db=db)
    init_auth(app, settings, directory, debug_toolbar=debug_toolbar)

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


def _init_debug_toolbar(app: Flask, settings: Settings) -> None:
    from .debugbar import init_toolbar

    init_toolbar(app, settings)
