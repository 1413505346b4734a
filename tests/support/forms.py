"""Reading a form's CSRF token from a rendered page, and the header htmx sends."""

from __future__ import annotations

import re

from flask.testing import FlaskClient

HX = {"HX-Request": "true"}

_TOKEN = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"|"X-CSRFToken": "([^"]+)"')


def csrf_token(client: FlaskClient, path: str = "/jobs/new/") -> str:
    """A valid CSRF token, read from a rendered page as a browser would."""
    html = client.get(path).get_data(as_text=True)
    match = _TOKEN.search(html)
    assert match, f"no CSRF token on {path}"
    return match.group(1) or match.group(2)
