"""The debug toolbar: local development only, never with credentials or through a proxy, and
no panel that shows a secret."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask

from dashboard import create_app
from dashboard.extensions import db
from tests.support.secured import OPERATOR_TOKEN, SECURED

DEV_KEY = "toolbar-test-secret-key-Zq8Xv2Lm9Pw4Rt7Yk3"
MARKER = 'id="flDebug"'  # the toolbar's markup


@contextmanager
def development(database_url: str, **config: Any) -> Iterator[Flask]:
    """A development app (DEBUG on, toolbar on), not in testing mode: as `flask run` builds it."""
    app = create_app(
        {
            "DATABASE_URL": database_url,
            "DEBUG": "true",
            "ENABLE_DEBUG_TOOLBAR": "true",
            "AUTO_MIGRATE": "false",
            "SECRET_KEY": DEV_KEY,
            "JOB_DEMO_HANDLERS": "true",
            **config,
        }
    )
    try:
        yield app
    finally:
        with app.app_context():
            db.engine.dispose()


def test_toolbar_shows_locally_without_the_config_panel_or_any_secret(app, database_url):
    with development(database_url) as dev:
        page = dev.test_client().get("/jobs/").get_data(as_text=True)
    assert MARKER in page
    assert DEV_KEY not in page
    assert "SECRET_KEY" not in page and "ConfigVarsDebugPanel" not in page
    assert "SQLALCHEMY_DATABASE_URI" not in page
    assert "postgresql" not in page  # no database URL (with or without a password)


def test_toolbar_is_never_shown_through_a_proxy(app, database_url):
    with development(database_url) as dev:
        client = dev.test_client()
        for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
            page = client.get("/jobs/", headers={header: "203.0.113.9"}).get_data(as_text=True)
            assert MARKER not in page, header
        assert MARKER in client.get("/jobs/").get_data(as_text=True)


def test_toolbar_never_loads_with_a_credential_and_a_loud_warning_is_logged(app, database_url, caplog):
    users = {"DASHBOARD_USERS": SECURED["DASHBOARD_USERS"]}
    tokens = {"API_TOKENS": f"deploy:operator:{OPERATOR_TOKEN}"}
    for credential in (users, tokens):
        caplog.clear()
        with caplog.at_level(logging.WARNING), development(database_url, **credential) as dev:
            assert "_debug_toolbar.static" not in dev.view_functions
            assert "debugtoolbar.sql_select" not in dev.view_functions
            page = dev.test_client().get("/login/").get_data(as_text=True)
        assert MARKER not in page
        assert any(
            "DEBUG is true" in r.getMessage() and "Set DEBUG=false" in r.getMessage() for r in caplog.records
        )


def test_the_sql_select_views_do_not_exist(app, database_url):
    with development(database_url) as dev:
        client = dev.test_client()
        for path in ("sql_select", "sql_explain"):
            response = client.get(f"/_debug_toolbar/views/sqlalchemy/{path}?query=x&duration=1")
            assert response.status_code == 404


def test_no_warning_in_development_without_credentials(app, database_url, caplog):
    with caplog.at_level(logging.WARNING), development(database_url):
        pass
    assert not any("DEBUG is true" in r.getMessage() for r in caplog.records)


def test_an_untrusted_host_in_development_answers_400(app, database_url):
    with development(database_url) as dev:
        client = dev.test_client()
        for path in ("/jobs/", "/api/jobs/", "/login/"):
            response = client.get(path, headers={"Host": "evil.example"})
            assert response.status_code == 400, path
        assert client.get("/jobs/", headers={"Host": "localhost"}).status_code == 200
