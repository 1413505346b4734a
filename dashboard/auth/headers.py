"""Security headers on every response: a Content-Security-Policy without inline script,
no MIME sniffing, no framing, a conservative referrer policy, HSTS over HTTPS, and
``Cache-Control: no-store`` on everything but static files.

Five static strings, set in one ``after_request``: simpler to read (and to audit) than a
library's options, and none of them depends on client input. The dashboard is built for
this policy: htmx is configured through a ``<meta>`` tag with ``allowEval`` and inline script
tags off, and every behaviour lives in ``static/app.js``.

With the debug toolbar on (development only), the policy also admits the toolbar's one
bootstrap line by its hash and inline styles, which the toolbar's markup needs.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

from flask import Flask, Response, request, url_for
from flask.globals import request_ctx

POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
STATIC_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
}
STATIC_ITEMS = tuple(STATIC_HEADERS.items())
CSP = "Content-Security-Policy"
HSTS = "max-age=31536000"
# Pages and API answers hold job data (and, signed in, a session): never kept in a cache or
# the browser's history. Only static files (and the toolbar's) may be cached.
NO_STORE = "no-store"
CACHEABLE_ENDPOINTS = frozenset({"static", "jobqueue.static", "_debug_toolbar.static"})


def render_policy(policy: dict[str, str]) -> str:
    return "; ".join(f"{name} {value}" for name, value in policy.items())


def script_hash(source: str) -> str:
    digest = base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
    return f"'sha256-{digest}'"


def _toolbar_policy() -> str:
    bootstrap = f"var DEBUG_TOOLBAR_STATIC_PATH = '{url_for('_debug_toolbar.static', filename='')}'"
    policy = dict(POLICY)
    policy["script-src"] += " " + script_hash(bootstrap)
    policy["style-src"] += " 'unsafe-inline'"
    return render_policy(policy)


def init_app(app: Flask, *, debug_toolbar: bool, hsts: bool, blueprints: Sequence[str] | None = None) -> None:
    """``hsts``: send Strict-Transport-Security on HTTPS responses (production only, so a
    development server reached once over HTTPS does not pin the browser to it).
    ``blueprints``: only on those blueprints' responses (a host's app keeps its own headers)."""
    strict = render_policy(POLICY)

    def secure_headers(response: Response) -> Response:
        # The toolbar's policy names its static URL: not buildable for an untrusted Host (400).
        csp = _toolbar_policy() if debug_toolbar and request_ctx.url_adapter is not None else strict
        headers = response.headers
        present = {name.lower() for name, _ in headers.items()}
        added = [(name, value) for name, value in ((CSP, csp), *STATIC_ITEMS) if name.lower() not in present]
        if hsts and request.is_secure and "strict-transport-security" not in present:
            added.append(("Strict-Transport-Security", HSTS))
        headers.extend(added)  # each set only where the view did not set its own
        if request.endpoint not in CACHEABLE_ENDPOINTS:
            headers["Cache-Control"] = NO_STORE
        return response

    for scope in blueprints or (None,):
        app.after_request_funcs.setdefault(scope, []).append(secure_headers)
