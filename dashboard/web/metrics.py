"""``GET /metrics``: the queue's gauges for Prometheus, behind the API's access rule.

Open while sign-in is off (development); otherwise ``Authorization: Bearer`` (read by
``auth.bearer``, as the API reads it) with ``METRICS_TOKEN`` or any ``API_TOKENS`` token,
viewer or operator. A refusal answers 401 and logs the path, never a token. The figures are
``ops/web_metrics.py``'s (a cached snapshot of ``store/reads/metrics.py``); a database outage
answers 503, so the scrape fails as it should.

Registered on the app at the root, not on the dashboard's blueprint: a scraper has no session,
so the sign-in redirect and CSRF of the pages do not apply to it.
"""

from __future__ import annotations

import hmac

from flask import Flask, Response, request
from flask.globals import app_ctx
from prometheus_client import CONTENT_TYPE_LATEST

from ..auth.bearer import BearerError, bearer_token
from ..auth.session import directory_of
from ..config import settings_of
from ..mount import mount_of
from ..ops.web_metrics import collector_of

REALM = 'Bearer realm="job-queue"'


def allowed(app: Flask) -> bool:
    """The API's rule: open while sign-in is off; else METRICS_TOKEN or any API token."""
    settings = settings_of(app)
    if not settings.auth_required and not mount_of(app).embedded:  # a host's mount needs a token
        return True
    try:
        token = bearer_token(request.headers.get("Authorization"))
    except BearerError:
        return False
    expected = settings.ops.metrics_token
    if expected and hmac.compare_digest(token.encode(), expected.encode()):
        return True
    return directory_of(app).token_owner(token) is not None


def metrics() -> Response:
    app = app_ctx.app  # the app itself, not the proxy: it is kept past this context
    if not allowed(app):
        app.logger.warning("metrics request refused: %s from %s", request.path, request.remote_addr)
        return Response(
            "Unauthorized: send Authorization: Bearer <METRICS_TOKEN or an API token>.\n",
            401,
            {"WWW-Authenticate": REALM, "Content-Type": "text/plain"},
        )
    try:
        body = collector_of(app).exposition()
    except Exception as error:  # the database is down: say so, the scrape fails as it should
        app.logger.warning("metrics unavailable: %s", type(error).__name__)
        return Response("metrics unavailable: database error\n", 503, {"Content-Type": "text/plain"})
    return Response(body, 200, {"Content-Type": CONTENT_TYPE_LATEST})


def init_app(app: Flask) -> None:
    """Register ``GET /metrics`` on ``app`` (a host's mount serves it from its own blueprint)."""
    app.add_url_rule("/metrics", "metrics", metrics, methods=["GET"])
