"""The running attempts' overdue check, asked before every claim: no look at the attempts
until the earliest lease end passes, and still right after a renewal or a new attempt."""

from __future__ import annotations

import threading
from datetime import timedelta

from dashboard.runtime.attempts import RunningAttempts
from dashboard.runtime.handlers import JobContext
from dashboard.store import values
from tests.support.factories import record

NOW = values.utcnow()


def _context(lease_ends_in: float) -> JobContext:
    job = record("running", locked_by="h:1:t:aa", locked_until=NOW + timedelta(seconds=lease_ends_in))
    return JobContext(job, worker_id="h:1:t:aa", lease_seconds=30, stopping=threading.Event())


def at(seconds: float):
    return NOW + timedelta(seconds=seconds)


def test_overdue_follows_the_earliest_lease_through_renewals_and_new_attempts():
    attempts = RunningAttempts()
    assert attempts.any_overdue(at(0)) is False
    first = _context(30)
    with attempts.running(first, "t-1"):
        assert attempts.any_overdue(at(29)) is False
        assert attempts.any_overdue(at(31)) is True
        first.locked_until = at(60)  # renewed
        assert attempts.any_overdue(at(31)) is False
        second = _context(10)
        with attempts.running(second, "t-2"):
            assert attempts.any_overdue(at(11)) is True  # the new attempt's earlier end is seen
        assert attempts.any_overdue(at(11)) is False  # it ended
        assert attempts.any_overdue(at(61)) is True
    assert attempts.any_overdue(at(61)) is False  # nothing runs


def test_an_attempt_without_a_lease_is_never_overdue():
    attempts = RunningAttempts()
    ctx = _context(30)
    ctx.locked_until = None
    with attempts.running(ctx, "t-1"):
        assert attempts.any_overdue(at(3600)) is False
