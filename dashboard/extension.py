"""The queue as a Flask extension: :class:`JobQueue` mounts its pages, JSON API, commands and
job types in any Flask app, its own standalone one (:func:`dashboard.create_app`) or a host's.

In a host's app nothing of the standalone leaks: the queue's settings are read at
``init_app`` (the environment, and ``app.config`` keys named like the variables); its
request-id, security-header and access hooks, template variables and error pages are scoped to
its own blueprints (``jobqueue_web``, ``jobqueue_api``, ``jobqueue``), so the host's routes get
none of them; its templates live under ``jobqueue/``; its static files are served under the
prefix; sign-in sessions, Flask-Login and an app-wide CSRF check stay the host's own. What it
keeps per app is one :class:`~dashboard.state.QueueState` under ``app.extensions["jobqueue"]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from .auth.principals import Directory
from .config import Settings
from .extensions import db as extensions_db
from .migrating import hide_from_autogenerate
from .mount import BLUEPRINTS, EMBEDDED_VERSION_TABLE, EXTENSION, Authorize, Mount, normalise_prefix
from .state import QueueState, state_of
from .store import jsonb

__all__ = ["JobQueue"]


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
        if getattr(app.extensions.get(EXTENSION), "mount", None) is not None:
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
            state = QueueState(settings, directory=Directory(settings))  # a malformed token stops it here
            state.mount = Mount(prefix, True, authorize, EMBEDDED_VERSION_TABLE)
            app.extensions[EXTENSION] = state
            _init_embedded(app, settings)
            hide_from_autogenerate(app)
        else:
            state_of(app).mount = Mount(prefix, False, authorize)
        _mount(app)


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


Door = Callable[[Flask, Mount], None]
DOORS: list[Door] = []


def door(mount: Door) -> Door:
    """Register how a door (the pages, the JSON API, the commands) mounts itself on an app.

    Each door's package registers itself when it is imported, and the package root imports
    the three, so every door is known before an app is built; the extension itself imports
    none of them (arrows point down: the doors use the extension, not the other way)."""
    DOORS.append(mount)
    return mount


def _mount(app: Flask) -> None:
    """The doors (blueprints, commands) and the job types: the same in every host."""
    from .runtime.handlers import load_handler_modules
    from .store import models, tables  # noqa: F401  (registers the tables on db.metadata)

    state = state_of(app)
    assert state.mount is not None
    for mount_door in DOORS:
        mount_door(app, state.mount)
    load_handler_modules(state.settings.worker.handler_modules)


def _init_embedded(app: Flask, settings: Settings) -> None:
    """What a host's app gets besides the blueprints: static files and ``/metrics`` under the
    prefix, request ids and security headers on the queue's own responses only, the queue's
    commands under ``flask jobqueue``."""
    from .auth import headers
    from .ops import logs, web_metrics

    jsonb.install()
    _htmx_requests(app)
    web_metrics.init_app(app)
    logs.init_app(app, settings.ops.log_format, blueprints=BLUEPRINTS)
    headers.init_app(app, debug_toolbar=False, hsts=not settings.debug, blueprints=BLUEPRINTS)
    for key, value in CSRF_DEFAULTS.items():
        app.config.setdefault(key, value)


def _htmx_requests(app: Flask) -> None:
    """The pages read ``request.htmx`` (htmx-flask): the host's request class gains it."""
    from htmx_flask.requests import HtmxAwareRequest

    if not issubclass(app.request_class, HtmxAwareRequest):
        app.request_class = type("JobQueueRequest", (HtmxAwareRequest, app.request_class), {})


# Flask-WTF's defaults, for the pages' forms (the host may have no CSRFProtect of its own).
CSRF_DEFAULTS: Mapping[str, Any] = {"WTF_CSRF_ENABLED": True, "WTF_CSRF_TIME_LIMIT": 3600}
