"""Flask-DebugToolbar, for local development only, with nothing secret in it.

Contract:

- loaded only when ``DEBUG`` and ``ENABLE_DEBUG_TOOLBAR`` are on and no user or API token is
  configured (``create_app`` decides; with credentials and ``DEBUG`` a warning is logged);
- shown only to clients in ``INTERNAL_IPS`` whose request did not come through a proxy: a
  request carrying ``X-Forwarded-For``, ``Forwarded`` or ``X-Real-IP`` never gets it (behind a
  reverse proxy on the same host, every visitor's address is the proxy's, an internal one);
- panels: :data:`PANELS`. Left out: the config panel (``SECRET_KEY``, the database URL with its
  password), the SQLAlchemy panel (its ``sql_select``/``sql_explain`` views run SQL, and are
  broken on SQLAlchemy 2, which has no ``Engine.execute``), the profiler and ``g``. The two
  SQL views answer 404 even if the panel's module was imported;
- a request with an untrusted ``Host`` gets no toolbar (it cannot build URLs): it answers 400;
- it starts collapsed: the ``fldt`` cookie its toolbar.js reads is set once per browser.
"""

from __future__ import annotations

from typing import NoReturn

from flask import Flask, Response, abort, request
from flask.globals import request_ctx
from flask_debugtoolbar import DebugToolbarExtension

from .config import Settings

PANELS = (
    "flask_debugtoolbar.panels.versions.VersionDebugPanel",
    "flask_debugtoolbar.panels.timer.TimerDebugPanel",
    "flask_debugtoolbar.panels.headers.HeaderDebugPanel",
    "flask_debugtoolbar.panels.request_vars.RequestVarsDebugPanel",
    "flask_debugtoolbar.panels.template.TemplateDebugPanel",
    "flask_debugtoolbar.panels.logger.LoggingPanel",
    "flask_debugtoolbar.panels.route_list.RouteListDebugPanel",
)
PROXY_HEADERS = ("X-Forwarded-For", "Forwarded", "X-Real-IP")
REMOVED_VIEWS = ("debugtoolbar.sql_select",)  # sql_explain is the same endpoint


class LocalDebugToolbar(DebugToolbarExtension):
    """The toolbar, refused to any request that came through a proxy."""

    def _show_toolbar(self) -> bool:
        if any(header in request.headers for header in PROXY_HEADERS):
            return False
        if not can_build_urls():  # an untrusted Host: the request answers 400, without us
            return False
        return super()._show_toolbar()


def can_build_urls() -> bool:
    """Whether ``url_for`` works in this request: not when its ``Host`` is not trusted
    (``ALLOWED_HOSTS``), where Flask has no URL adapter and the request is a 400."""
    return request_ctx.url_adapter is not None


def _gone(**_: object) -> NoReturn:
    abort(404)


def init_toolbar(app: Flask, settings: Settings) -> None:
    app.config["DEBUG_TB_PANELS"] = PANELS
    app.config["DEBUG_TB_TEMPLATE_EDITOR_ENABLED"] = False
    app.config.setdefault("DEBUG_TB_INTERCEPT_REDIRECTS", False)
    app.config.setdefault("DEBUG_TB_HOSTS", list(settings.internal_ips))
    LocalDebugToolbar(app)
    for endpoint in REMOVED_VIEWS:
        if endpoint in app.view_functions:
            app.view_functions[endpoint] = _gone
    app.after_request(_toolbar_starts_collapsed)


def _toolbar_starts_collapsed(response: Response) -> Response:
    # Flask-DebugToolbar has no setting for this; its toolbar.js hides itself while the
    # ``fldt`` cookie is set. Set it once per browser; the toolbar's handle reopens it.
    if "fldt" not in request.cookies and "fldt_seen" not in request.cookies:
        response.set_cookie("fldt", "hide", path="/", samesite="Lax")
        response.set_cookie("fldt_seen", "1", path="/", samesite="Lax", max_age=86400 * 365)
    return response
