"""Waiting on conditions, never on the clock: the suite's one polling helper."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def deadline_scale() -> float:
    """How much longer every deadline is: ``TEST_DEADLINE_SCALE`` if set, else the number of
    test processes sharing the machine (pytest-xdist's workers). A deadline only bounds a wait
    that fails; a passing one ends as soon as its condition holds, so a longer one costs a
    passing test nothing and keeps a busy machine from failing a slow but correct one."""
    explicit = os.environ.get("TEST_DEADLINE_SCALE")
    if explicit:
        return max(1.0, float(explicit))
    return max(1.0, float(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def wait_until(predicate: Callable[[], T], timeout: float = 15.0, message: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds
    (times :func:`deadline_scale`)."""
    timeout *= deadline_scale()
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(0.05)
