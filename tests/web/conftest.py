"""Helpers for the dashboard's Flask-client tests."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from tests.support.forms import csrf_token
from tests.support.tracing import memory_spans  # noqa: F401  (a fixture)


@pytest.fixture
def token(client: FlaskClient) -> str:
    return csrf_token(client)
