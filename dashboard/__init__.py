"""The package's two entry points: :class:`JobQueue`, the queue as a Flask extension mounted in
any app, and :func:`create_app`, the standalone app, which mounts it at the root.

Application code enqueues and declares job types through :mod:`dashboard.jobs`.

In a host's app nothing of the standalone leaks: the queue's settings are read at
``init_app`` (the environment, and ``app.config`` keys named like the variables); its
request-id, security-header and access hooks are scoped to its own blueprints, so the host's
routes get none of them (no CSP, no before_request); its static files are served under the
prefix; sign-in sessions, Flask-Login and an app-wide CSRF check stay the host's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Flask
from flask_sqlalchemy import SQLAlchemy

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
from .extensions import csrf, db, htmx, migrate
from .extensions import db as extensions_db
from .migrating import hide_from_autogenerate, upgrade_database
from .mount import BLUEPRINTS, EMBEDDED_VERSION_TABLE, EXTENSION, Authorize, Mount, normalise_prefix
from .ops.setup import init_app as init_ops
from .store import jsonb

__all__ = ["JobQueue", "create_app", "upgrade_database"]


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

    from . import auth, web

    # The standalone app is the queue's first host: mounted at the root, with its own sign-in.
    JobQueue().init_app(app, db=db)
    web.metrics.init_app(app)  # GET /metrics, at the root beside the blueprints
    auth.init_app(app, settings, directory, debug_toolbar=debug_toolbar)

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


class JobQueue:
    """The job queue's pages, JSON API and commands, mounted in a Flask app.

    ``JobQueue(app, db=db, url_prefix=..., authorize=...)`` or ``JobQueue().init_app(app, ...)``.
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        db: SQLAlchemy | None = None,
        url_prefix: str | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        self.app: Flask | None = None
        if app is not None:
            self.init_app(app, db=db, url_prefix=url_prefix, authorize=authorize)

    def init_app(
        self,
        app: Flask,
        *,
        db: SQLAlchemy | None = None,
        url_prefix: str | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        """Mount the queue on ``app``.

        ``db``: the host's Flask-SQLAlchemy instance, already set up on ``app`` (the queue's
        tables live in its database; ``flask jobqueue upgrade`` creates them). ``url_prefix``:
        where the pages go (``"/ops/jobs"``; the API under ``url_prefix + "/api"``).
        ``authorize(request)``: ``"operator"``, ``"viewer"`` or ``None`` (refused) for every
        page; without it every page is refused. The API and ``/metrics`` need a bearer token
        (``API_TOKENS``, ``METRICS_TOKEN``) as in the standalone app. A second mount on the same
        app is refused. Raises ``TypeError``/``ValueError`` naming the argument.
        """
        if EXTENSION in app.extensions:
            raise RuntimeError(
                f"a JobQueue is already mounted on the app {app.name!r}: one queue per app; "
                "call init_app once (JobQueue(app, ...) already calls it)"
            )
        prefix = normalise_prefix(url_prefix)
        if authorize is not None and not callable(authorize):
            raise TypeError(
                "authorize must be a function of the request returning 'operator', 'viewer' or None"
            )
        standalone = db is None or db is extensions_db
        if not standalone and not prefix:
            raise ValueError(
                "url_prefix is required in a host's app (url_prefix='/ops/jobs'): at the root the "
                "queue's routes (/login/, /logout/, /jobs/, /metrics, ...) would shadow the app's own"
            )
        if not standalone:
            if not isinstance(db, SQLAlchemy):
                raise TypeError(f"db must be the app's Flask-SQLAlchemy instance, got {type(db).__name__}")
            if app.extensions.get("sqlalchemy") is not db:
                raise ValueError(
                    "db must be set up on this app first: db.init_app(app), then queue.init_app(app)"
                )
            settings = Settings.from_env(host_environment(app))
            Directory(settings)  # a malformed user or token stops the start here
            app.extensions["jobqueue.settings"] = settings
            app.extensions[EXTENSION] = Mount(prefix, True, authorize, EMBEDDED_VERSION_TABLE)
            _init_embedded(app, settings, prefix)
            hide_from_autogenerate(app)
        else:
            app.extensions[EXTENSION] = Mount(prefix, False, authorize)
        _mount(app, prefix)
        self.app = app


def host_environment(app: Flask) -> dict[str, str]:
    """The settings' source in a host's app: the environment, then ``app.config`` values of
    keys that are a setting's variable (``JOB_WORKER_THREADS``, ``API_TOKENS`` ...)."""
    names = Settings.variable_names()
    env = dict(os.environ)
    for key, value in app.config.items():
        if key in names and isinstance(value, str | int | float):
            env[key] = _as_text(value)
    return env


def _as_text(value: str | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _mount(app: Flask, prefix: str) -> None:
    """Blueprints, the templates' helpers, commands and job types: the same in every host."""
    from . import api, cli, web
    from .mount import mount_of
    from .paths import API_PREFIX
    from .runtime.handlers import DEMO_SWITCH, load_handler_modules
    from .store import models  # noqa: F401  (registers the tables on db.metadata)

    settings = app.extensions["jobqueue.settings"]
    app.register_blueprint(api.bp, url_prefix=prefix + API_PREFIX)
    app.register_blueprint(web.bp, url_prefix=prefix or None)
    cli.init_app(app, embedded=mount_of(app).embedded)
    app.extensions[DEMO_SWITCH] = settings.worker.demo_handlers
    load_handler_modules(settings.worker.handler_modules)


def _init_embedded(app: Flask, settings: Settings, prefix: str) -> None:
    """What a host's app gets besides the blueprints: static files and ``/metrics`` under the
    prefix, request ids and security headers on the queue's own responses only, the queue's
    commands under ``flask jobqueue``."""
    from .auth import headers
    from .ops import logs, web_metrics
    from .web import metrics

    jsonb.install()
    _htmx_requests(app)
    own = Blueprint("jobqueue", __name__, static_folder=STATIC_DIR, static_url_path="/static")
    own.add_url_rule("/metrics", "metrics", metrics.metrics, methods=["GET"])
    app.register_blueprint(own, url_prefix=prefix or None)
    web_metrics.init_app(app)
    logs.init_app(app, settings.ops.log_format, blueprints=BLUEPRINTS)
    headers.init_app(app, debug_toolbar=False, hsts=not settings.debug, blueprints=BLUEPRINTS)
    for key, value in CSRF_DEFAULTS.items():
        app.config.setdefault(key, value)
    app.extensions["jobqueue.directory"] = Directory(settings)


def _htmx_requests(app: Flask) -> None:
    """The pages read ``request.htmx`` (htmx-flask): the host's request class gains it."""
    from htmx_flask.requests import HtmxAwareRequest

    if not issubclass(app.request_class, HtmxAwareRequest):
        app.request_class = type("JobQueueRequest", (HtmxAwareRequest, app.request_class), {})


# Flask-WTF's defaults, for the pages' forms (the host may have no CSRFProtect of its own).
CSRF_DEFAULTS: Mapping[str, Any] = {"WTF_CSRF_ENABLED": True, "WTF_CSRF_TIME_LIMIT": 3600}
