"""``JobQueue``: the queue as a Flask extension, mounted in any app with ``init_app``.

The standalone app (``create_app``) is its first host: it mounts the queue at the root with
the queue's own sign-in. A team's own app mounts it under a prefix, on its own
Flask-SQLAlchemy ``db``, behind its own sign-in (``authorize``)::

    queue = JobQueue()
    queue.init_app(app, db=db, url_prefix="/ops/jobs", authorize=who_may)

In a host's app nothing of the standalone leaks: its settings are read here, at
``init_app`` (the environment, and ``app.config`` keys named like the variables); the
request-id, security-header and sign-in hooks are scoped to the queue's blueprints, so the
host's own routes get none of them (no CSP, no before_request); static files are served under
the prefix; the sign-in sessions, Flask-Login and the app-wide CSRF check stay the host's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import click
from flask import Blueprint, Flask
from flask.cli import AppGroup, with_appcontext
from flask_sqlalchemy import SQLAlchemy

from . import limits
from .auth.principals import Directory
from .config import Settings
from .database import STATIC_DIR
from .extensions import db as queue_db
from .mount import BLUEPRINTS, EMBEDDED_VERSION_TABLE, EXTENSION, Authorize, Mount, normalise_prefix
from .store import jsonb
from .store.states import ACTIVITY_EVENTS


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
        standalone = db is None or db is queue_db
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
    from flask import url_for
    from flask_wtf.csrf import generate_csrf

    from . import api, cli, web
    from .mount import mount_of
    from .paths import API_PREFIX
    from .runtime.handlers import DEMO_SWITCH, load_handler_modules
    from .store import models  # noqa: F401  (registers the tables on db.metadata)

    settings = app.extensions["jobqueue.settings"]
    app.register_blueprint(api.bp, url_prefix=prefix + API_PREFIX)
    app.register_blueprint(web.bp, url_prefix=prefix or None)

    def queue_static(filename: str) -> str:
        return url_for(mount_of(app).static_endpoint, filename=filename)

    # Templates read the shared value rules, the event types of an attempt's activity, where
    # the queue's static files are, and the CSRF token htmx sends (Flask-WTF's, in any host).
    helpers = {
        "limits": limits,
        "activity_events": ACTIVITY_EVENTS,
        "queue_static": queue_static,
        "csrf_token": generate_csrf,
    }
    app.context_processor(lambda: helpers)
    cli.init_app(app)
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
    app.cli.add_command(jobqueue_group)


def _htmx_requests(app: Flask) -> None:
    """The pages read ``request.htmx`` (htmx-flask): the host's request class gains it."""
    from htmx_flask.requests import HtmxAwareRequest

    if not issubclass(app.request_class, HtmxAwareRequest):
        app.request_class = type("JobQueueRequest", (HtmxAwareRequest, app.request_class), {})


# Flask-WTF's defaults, for the pages' forms (the host may have no CSRFProtect of its own).
CSRF_DEFAULTS: Mapping[str, Any] = {"WTF_CSRF_ENABLED": True, "WTF_CSRF_TIME_LIMIT": 3600}

jobqueue_group = AppGroup("jobqueue", help="The job queue's commands (migrations, retention, credentials).")


@jobqueue_group.command("upgrade")
@click.option("--revision", default="head", show_default=True, help="The queue's revision to migrate to.")
@with_appcontext
def upgrade_command(revision: str) -> None:
    """Bring the queue's tables to head in this app's database (version table
    jobqueue_alembic_version; the app's own migrations are left alone)."""
    from flask import current_app

    from .migrating import upgrade_embedded

    upgrade_embedded(current_app._get_current_object(), revision)  # type: ignore[attr-defined]
    click.echo(f"the queue's tables are at {revision} ({EMBEDDED_VERSION_TABLE})")


def _add_queue_commands() -> None:
    from .auth.commands import hash_password_command, new_token_command
    from .ops.commands import prune_command

    for command in (prune_command, hash_password_command, new_token_command):
        jobqueue_group.add_command(command)


_add_queue_commands()
