"""What the queue keeps per Flask app: one :class:`QueueState` under
``app.extensions["jobqueue"]``, as Flask-SQLAlchemy keeps its one object under ``"sqlalchemy"``.

The app factory (or ``JobQueue.init_app`` in a host's app) creates it with the settings read
once; the rest is filled as the parts are set up: where the queue is mounted, the users and
tokens, the sign-in throttle, the metrics collector, the OpenAPI document once built. Each
part's accessor (``settings_of``, ``mount_of``, ``directory_of`` …) reads its field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flask import Flask
from flask.sansio.app import App

from .mount import EXTENSION

if TYPE_CHECKING:
    from .auth.principals import Directory
    from .auth.throttle import Throttle
    from .config import Settings
    from .mount import Mount
    from .ops.web_metrics import QueueCollector
    from .store.replica import Replica


@dataclass
class QueueState:
    settings: Settings
    mount: Mount | None = None  # None until JobQueue.init_app mounts the pages and the API
    directory: Directory | None = None
    throttle: Throttle | None = None
    trusted_proxies: tuple[Any, ...] | None = None  # FORWARDED_ALLOW_IPS as networks; None: '*'
    metrics: QueueCollector | None = None
    # built for these settings and registered job types
    openapi: tuple[Settings, tuple[str, ...], dict[str, Any], str] | None = None
    replica: Replica | None = None  # DATABASE_REPLICA_URL's, built on first use (ops/replica.py)


def state_of(app: Flask | App) -> QueueState:
    """The app's :class:`QueueState` (``KeyError`` for an app the queue was never set up on)."""
    state: QueueState = app.extensions[EXTENSION]
    return state
