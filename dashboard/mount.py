"""Where the queue is mounted in its app, and who decides access there.

One :class:`Mount` per app (the ``mount`` of ``app.extensions["jobqueue"]``, set by
``JobQueue.init_app``):
the URL prefix of the pages (the API is under ``prefix + "/api"``), the host's
``authorize(request)``, and the version table of the queue's migrations. The standalone app
(``create_app``) is mounted at the root with the queue's own sign-in and Alembic's default
version table; a host app (``embedded``) brings its own sign-in through ``authorize``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask, Request, current_app, url_for
from flask.sansio.app import App

from .paths import API_PREFIX, is_api_path

EXTENSION = "jobqueue"
STANDALONE_VERSION_TABLE = "alembic_version"
EMBEDDED_VERSION_TABLE = "jobqueue_alembic_version"
# The blueprints a mount registers; hooks scoped to them never run for a host's own routes.
BLUEPRINTS = ("jobqueue_web", "jobqueue_api", "jobqueue")
_PREFIX = re.compile(r"(/[A-Za-z0-9._~-]+)*")

Authorize = Callable[[Request], Any]


def normalise_prefix(url_prefix: str | None) -> str:
    """``""`` for the root, else ``/a/b`` without a trailing slash; ``ValueError`` otherwise."""
    if url_prefix is None or url_prefix in ("", "/"):
        return ""
    if not isinstance(url_prefix, str):
        raise TypeError(f"url_prefix must be a string, got {type(url_prefix).__name__}")
    prefix = url_prefix.rstrip("/")
    if not prefix.startswith("/") or not _PREFIX.fullmatch(prefix):
        raise ValueError(f"url_prefix must be a path like /ops/jobs, got {url_prefix!r}")
    return prefix


@dataclass(frozen=True)
class Mount:
    url_prefix: str  # "" at the root
    embedded: bool  # in a host's app, behind the host's authorize
    authorize: Authorize | None = None
    version_table: str = STANDALONE_VERSION_TABLE

    @property
    def api_prefix(self) -> str:
        return self.url_prefix + API_PREFIX

    @property
    def static_endpoint(self) -> str:
        """The endpoint the pages' static files are served by (the host's own ``static`` is
        left to the host)."""
        return "jobqueue.static" if self.embedded else "static"

    @property
    def upgrade_command(self) -> str:
        return "flask --app HOST jobqueue upgrade" if self.embedded else "flask --app wsgi db upgrade"

    def is_api_path(self, path: str) -> bool:
        """The API's prefix itself or anything under it (``/api`` at the root; not ``/apiary``)."""
        return is_api_path(path, self.url_prefix)


ROOT = Mount(url_prefix="", embedded=False)


def mount_of(app: Flask | App) -> Mount:
    """The app's mount (the standalone root mount for an app that has none yet), from the
    queue's state object (:mod:`.state`)."""
    mount = getattr(app.extensions.get(EXTENSION), "mount", None)
    return mount if isinstance(mount, Mount) else ROOT


def static_url(filename: str) -> str:
    """The URL of one of the queue's static files in the current app (its own ``static`` in the
    standalone app, ``jobqueue.static`` under a host's prefix)."""
    return url_for(mount_of(current_app).static_endpoint, filename=filename)
