"""Dashboard blueprint: server-rendered pages for operators, with HTMX fragments.

Every page works as plain HTML links and forms; a request htmx makes (``request.htmx``, from
htmx-flask) gets only the fragment that changes (polling and in-place swaps). The views read
through ``store.reads`` and change state only through ``store.lifecycle`` and ``store.flow``.
``GET /metrics`` (:mod:`.metrics`) is registered at the root of the standalone app, under the
prefix in a host's (:func:`mount_pages`).
"""

# The view modules register their routes on ``bp`` when imported.
from flask import Blueprint, Flask

from ..database import STATIC_DIR
from ..extension import door
from ..mount import Mount
from . import (  # noqa: F401
    alarm,
    audit,
    bulk,
    errors,
    events,
    guards,
    jobs,
    metrics,
    overview,
    queues,
    read_source,
    rendering,
    schedules,
    signin,
    timeline,
    workers,
    workflows,
)
from .blueprint import bp

__all__ = ["bp", "metrics"]


@door
def mount_pages(app: Flask, mount: Mount) -> None:
    """The pages under the mount's prefix, and ``GET /metrics``: at the root of the standalone
    app; in a host's app under the prefix, on a blueprint of the queue's own (``jobqueue``)
    that also serves the pages' static files there (the host's ``static`` stays the host's)."""
    app.register_blueprint(bp, url_prefix=mount.url_prefix or None)
    if not mount.embedded:
        metrics.init_app(app)
        return
    own = Blueprint("jobqueue", __name__, static_folder=STATIC_DIR, static_url_path="/static")
    own.add_url_rule("/metrics", "metrics", metrics.metrics, methods=["GET"])
    app.register_blueprint(own, url_prefix=mount.url_prefix or None)
