"""Fixtures for the access tests: a secured app on the session's database, and clients
signed in with each role (see :mod:`.secured` for the users and tokens)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.support.secured import build, sign_in


@pytest.fixture(scope="session")
def secured_app(app: Flask, database_url: str) -> Iterator[Flask]:
    """Depends on ``app`` so the tables are emptied before each test that uses it."""
    with build(database_url) as secured:
        yield secured


@pytest.fixture
def anonymous(secured_app: Flask) -> FlaskClient:
    return secured_app.test_client()


@pytest.fixture
def operator(secured_app: Flask) -> FlaskClient:
    client = secured_app.test_client()
    assert sign_in(client, "olga").status_code == 303
    return client


@pytest.fixture
def viewer(secured_app: Flask) -> FlaskClient:
    client = secured_app.test_client()
    assert sign_in(client, "vera").status_code == 303
    return client
