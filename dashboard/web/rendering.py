"""What every view shares: page-or-fragment rendering, the request's clock, template helpers."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import current_app, has_request_context, render_template
from flask_wtf.csrf import generate_csrf
from htmx_flask import request
from markupsafe import Markup, escape

import dashboard.config.rules as rules

from ..config import settings_of
from ..mount import static_url
from ..store import reading
from ..store.states import ACTIVITY_EVENTS
from ..store.values import utcnow
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
    """One clock reading per request, so every time on a page is relative to the same now
    (kept in the request's WSGI environ: an application context can outlive one request)."""
    if not has_request_context():
        return utcnow()
    reading: datetime = request.environ.setdefault("jobqueue.now", utcnow())
    return reading


T = TypeVar("T")
log = logging.getLogger(__name__)


def limited(load: Callable[[], T]) -> T | None:
    """``load()`` under the dashboard's query time limit (``DASHBOARD_QUERY_TIMEOUT_MS``), or
    ``None`` if a read ran past it: a page then shows that part as unavailable."""
    try:
        with reading.time_limit(settings_of(current_app).dashboard_query_timeout_ms):
            return load()
    except reading.QueryTimeout:
        log.warning("a dashboard read ran past its time limit", exc_info=True)
        return None


def safe_next(target: str | None) -> str | None:
    """A same-site path to go back to after a POST, or ``None`` (no open redirects, and nothing
    a ``Location`` header cannot carry: control characters would make the redirect fail)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return None
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in target):
        return None
    parts = urlsplit(target)
    return None if parts.scheme or parts.netloc else target


@bp.context_processor
def template_helpers() -> dict[str, Any]:
    """What the queue's templates read, on the queue's own pages only (a host's templates keep
    their own names): the value rules, an attempt's activity events, the queue's static files
    and the CSRF token htmx sends (Flask-WTF's, in any host)."""
    return {
        "rules": rules,
        "activity_events": ACTIVITY_EVENTS,
        "queue_static": static_url,
        "csrf_token": generate_csrf,
    }


@bp.app_template_filter("jq_relative")
def relative_filter(moment: datetime | None) -> str:
    return "" if moment is None else relative(moment, now())


@bp.app_template_filter("jq_absolute")
def absolute_filter(moment: datetime | None) -> str:
    return "" if moment is None else absolute(moment, settings_of(current_app).tz)


@bp.app_template_filter("jq_duration")
def duration_filter(seconds: float) -> str:
    return duration(seconds)


@bp.app_template_filter("jq_pretty_json")
def pretty_json(value: Any) -> str:
    """Indented JSON for payloads, results and event data (escaped by the template)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


ISO_MOMENT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


@bp.app_template_filter("jq_times_in")
def times_in(text: str) -> Markup:
    """``text`` escaped, each ISO 8601 time in it (a lease's end in a lease-expiry error) shown
    in ``TIME_ZONE`` with how long ago, the exact value kept in a ``<time>`` element."""
    parts: list[str] = []
    last = 0
    for found in ISO_MOMENT.finditer(text):
        try:
            moment = datetime.fromisoformat(found.group().replace("Z", "+00:00"))
        except ValueError:
            continue
        shown = f"{absolute_filter(moment)} ({relative_filter(moment)})"
        parts += [
            escape(text[last : found.start()]),
            Markup('<time datetime="%s">%s</time>') % (found.group(), shown),
        ]
        last = found.end()
    parts.append(escape(text[last:]))
    return Markup("").join(parts)


@bp.app_template_filter("jq_moment")
def moment_filter(raw: object) -> datetime | None:
    """An ISO 8601 text from JSON data (an audit entry's) as a time, or None."""
    if not isinstance(raw, str):
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo is not None else None


@bp.app_template_filter("jq_breakable")
def breakable(name: str) -> Markup:
    """A dotted name (a job type, a worker id) that may break after ``.``, ``_``, ``-`` or ``:``
    and nowhere else: ``email.send`` wraps as ``email.`` / ``send``, never ``email.se`` / ``nd``."""
    return Markup("").join(
        escape(part) + (Markup("<wbr>") if part[-1:] in "._-:" else Markup(""))
        for part in re.split(r"(?<=[._\-:])", name)
    )
