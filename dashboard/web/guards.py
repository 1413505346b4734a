"""Checks at the dashboard's door, before any view (and before the CSRF check reads the form).

Werkzeug is lenient with what it cannot decode: invalid UTF-8 in a query string or a form stays
as literal ``%FF`` text, raw undecodable bytes make the whole form silently empty, and
Flask-WTF feeds JSON bodies and file uploads to forms as if they were fields. Here the request
is refused instead, with a clear 4xx:

- 400 when the query string or a form body is not valid UTF-8 (after percent-decoding);
- 415 when a POST carries a body that is not ``application/x-www-form-urlencoded`` (what the
  dashboard's forms and htmx send);
- 403 when a browser says a POST comes from another site (``Sec-Fetch-Site``): a second fence
  beside the CSRF token, for browsers that send the header.

It runs as a URL value preprocessor because Flask runs those before every ``before_request``
function, the app-wide CSRF check included; that check parses the form, after which the raw
body can no longer be read. Reading it first caches it, and the form is parsed from the cache.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from flask import abort, request

from .blueprint import bp

FORM_TYPE = "application/x-www-form-urlencoded"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_SITE_FETCHES = frozenset({"same-origin", "none"})  # "none": typed or bookmarked by the user


def is_utf8_form_data(raw: bytes) -> bool:
    """Whether ``raw`` (a query string or a urlencoded body) decodes to text, escapes included."""
    try:
        parse_qsl(raw.decode("utf-8"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def _has_body() -> bool:
    chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
    return bool(request.content_length) or bool(request.mimetype) or chunked


@bp.url_value_preprocessor
def refuse_undecodable_requests(endpoint: str | None, values: dict[str, Any] | None) -> None:
    if not is_utf8_form_data(request.query_string):
        abort(400, description="The query string is not valid UTF-8.")
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if request.method not in SAFE_METHODS and fetch_site is not None and fetch_site not in SAME_SITE_FETCHES:
        abort(403, description="A form sent from another site was refused. Use the dashboard's own pages.")
    if request.method != "POST" or not _has_body():
        return
    if request.mimetype != FORM_TYPE:
        abort(415, description=f"Forms are sent as {FORM_TYPE}.")
    if not is_utf8_form_data(request.get_data(cache=True)):  # 413 above MAX_CONTENT_LENGTH
        abort(400, description="The form is not valid UTF-8.")
