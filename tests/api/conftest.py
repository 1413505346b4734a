"""API test fixtures: a job type registered for the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dashboard.runtime import handlers

from .helpers import TEST_TYPE


@pytest.fixture
def job_type(app) -> Iterator[str]:
    """A job type registered for the test only, so no test depends on which demo types exist."""
    handlers.handler(TEST_TYPE)(lambda context: None)
    yield TEST_TYPE
    handlers._registry.pop(TEST_TYPE, None)
