"""What every view shares: page-or-fragment rendering, the request's clock, template helpers."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from flask import current_app, g, render_template
from htmx_flask import request

from ..config import settings_of
from ..store.service import utcnow
from .blueprint import bp
from .timefmt import absolute, duration, relative


def is_htmx() -> bool:
    """True for requests htmx makes (polling, in-place swaps): they get a fragment."""
    return bool(request.htmx)


def page_or_fragment(page_template: str, fragment_template: str, /, **context: Any) -> str:
    """Render the full page for browsers, only the fragment for htmx requests."""
    return render_template(fragment_template if is_htmx() else page_template, **context)


def refused_status(refused: bool) -> int:
    """The status of a page that shows input it refused (marked at each field, saying why): 400
    for a browser; 200 for htmx, which swaps only 2xx answers."""
    return 400 if refused and not is_htmx() else 200


def now() -> datetime:
    """One clock reading per request, so every time on a page is relative to the same now."""
    if "now" not in g:
        g.now = utcnow()
    return g.now


def safe_next(target: str | None) -> str | None:
    """A same-site path to go back to after a POST, or ``None`` (no open redirects, and nothing
    a ``Location`` header cannot carry: control characters would make the redirect fail)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return None
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in target):
        return None
    parts = urlsplit(target)
    return None if parts.scheme or parts.netloc else target


@bp.app_template_filter("relative")
def relative_filter(moment: datetime | None) -> str:
    return "" if moment is None else relative(moment, now())


@bp.app_template_filter("absolute")
def absolute_filter(moment: datetime | None) -> str:
    return "" if moment is None else absolute(moment, settings_of(current_app).tz)


@bp.app_template_filter("duration")
def duration_filter(seconds: float) -> str:
    return duration(seconds)


@bp.app_template_filter("pretty_json")
def pretty_json(value: Any) -> str:
    """Indented JSON for payloads, results and event data (escaped by the template)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
