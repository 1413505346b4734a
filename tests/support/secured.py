"""Settings of an app with sign-in on: two users and two tokens, one of each role.

Passwords are hashed with few PBKDF2 rounds so the suite stays quick; the configuration
accepts any werkzeug hash, and ``flask hash-password`` (tested separately) makes scrypt ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from werkzeug.security import generate_password_hash

from dashboard import create_app
from dashboard.auth.principals import token_digest
from dashboard.extensions import db

SECRET_KEY = "access-tests-secret-key-0123456789abcdefghij"
PASSWORDS = {"olga": "olga-operator-pw", "vera": "vera-viewer-pw"}
OPERATOR_TOKEN = "deploy-token-" + "o" * 40
VIEWER_TOKEN = "grafana-token-" + "v" * 40
_TOKEN_FIELD = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


def fast_hash(password: str) -> str:
    return generate_password_hash(password, method="pbkdf2:sha256:1000")


SECURED = {
    "TESTING": True,
    "DEBUG": "false",
    "ENABLE_DEBUG_TOOLBAR": "false",
    "AUTO_MIGRATE": "false",
    "AUTH_DISABLED": "false",
    "JOB_DEMO_HANDLERS": "true",
    "SECRET_KEY": SECRET_KEY,
    "DASHBOARD_USERS": ",".join(
        [f"olga:operator:{fast_hash(PASSWORDS['olga'])}", f"vera:viewer:{fast_hash(PASSWORDS['vera'])}"]
    ),
    # the viewer's token is configured by its digest only, as `flask new-token` suggests
    "API_TOKENS": ",".join(
        [f"deploy:operator:{OPERATOR_TOKEN}", f"grafana:viewer:sha256:{token_digest(VIEWER_TOKEN).hex()}"]
    ),
}


@contextmanager
def build(database_url: str, **config: Any) -> Iterator[Flask]:
    """A secured app with ``config`` changed, its connections closed afterwards."""
    built = create_app({**SECURED, "DATABASE_URL": database_url, **config})
    try:
        yield built
    finally:
        with built.app_context():
            db.engine.dispose()


def form_token(client: FlaskClient, path: str = "/login/") -> str:
    html = client.get(path).get_data(as_text=True)
    match = _TOKEN_FIELD.search(html)
    assert match, f"no CSRF token on {path}"
    return match.group(1)


def sign_in(client: FlaskClient, name: str, password: str | None = None, **extra: str) -> Any:
    token = form_token(client)
    data = {"csrf_token": token, "username": name, "password": password or PASSWORDS[name], **extra}
    return client.post("/login/", data=data)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
