"""A schedule with unique options: a due slot whose key a live run holds enqueues nothing, and
that run stands for it; once the run has ended, the next slot runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.runtime import schedules as declared
from dashboard.store import lifecycle
from dashboard.store.flow.schedules import Declaration, fire_due, sync
from dashboard.store.reads import lists as find_jobs

T0 = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def test_a_live_run_holding_the_key_stands_for_the_next_slots(app):
    tick = Declaration(
        "tick", "* * * * *", "UTC", "demo.success", {}, "default", 50, 3, "latest",
        unique_key="tick-run", unique_while="active",
    )  # fmt: skip
    sync([tick], now=T0)
    [first] = fire_due(now=T0 + MINUTE)
    assert first.runs[0].created
    held = first.runs[0].job_id
    claimed = lifecycle.claim_next_job("w1", lease_seconds=600, now=T0 + MINUTE)
    assert claimed is not None and claimed.id == held and claimed.unique_key == "tick-run"
    [second] = fire_due(now=T0 + 2 * MINUTE)  # still running: the slot is that run
    assert not second.runs[0].created and second.runs[0].job_id == held
    assert find_jobs.list_jobs(limit=10, offset=0).count == 1
    lifecycle.complete_job(held, "w1", claimed.attempts, {}, now=T0 + 2 * MINUTE)
    [third] = fire_due(now=T0 + 3 * MINUTE)
    assert third.runs[0].created and third.runs[0].job_id != held
    assert find_jobs.list_jobs(limit=10, offset=0).count == 2


def test_declarations_carry_and_check_the_unique_options():
    try:
        made = declared.schedule(
            "uniq-tick", cron="* * * * *", type="demo.success", unique_key="k", unique_for=60
        )
        assert (made.unique_key, made.unique_for, made.unique_while) == ("k", 60.0, "active")
        [resolved] = [d for d in declared.declarations("UTC", 3) if d.name == "uniq-tick"]
        assert (resolved.unique_key, resolved.unique_for, resolved.unique_while) == ("k", 60.0, "active")
    finally:
        declared.forget("uniq-tick")
    with pytest.raises(ValueError, match="'bad-tick': unique_for"):
        declared.schedule("bad-tick", cron="* * * * *", type="demo.success", unique_key="k", unique_for=-1)
    with pytest.raises(ValueError, match="'bad-tick': unique_while needs a unique_key"):
        declared.schedule("bad-tick", cron="* * * * *", type="demo.success", unique_while="queued")
