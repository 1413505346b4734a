"""Helpers for the dashboard's Flask-client tests."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from tests.support.forms import csrf_token


@pytest.fixture
def token(client: FlaskClient) -> str:
    return csrf_token(client)
