"""The scheduler service's tick in process: idle, due, and its place among the worker's services."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta

import pytest
from sqlalchemy import text

from dashboard.config import WorkerSettings
from dashboard.extensions import db
from dashboard.runtime import handlers, scheduler, schedules
from dashboard.runtime.threads import ThreadRuntime
from dashboard.runtime.worker import Worker
from dashboard.store.flow import schedules as store
from dashboard.store.flow.schedules import Declaration, sync
from dashboard.store.values import utcnow

TICK = Declaration("tick", "* * * * *", "UTC", "demo.success", {}, "default", 50, 3, "all")


def make_scheduler(app) -> scheduler.Scheduler:
    return scheduler.Scheduler(ThreadRuntime(app, WorkerSettings(), "h:1:thread-0:abcd", threading.Event()))


def test_an_idle_tick_sleeps_the_longest_and_a_due_one_fires_then_looks_again(app):
    part = make_scheduler(app)
    with part.runtime.holding_connection():
        assert part.step() == scheduler.WAKE_MAX_SECONDS  # no schedule at all
        sync([TICK])
        wait = part.step()
        assert scheduler.WAKE_MIN_SECONDS <= wait <= scheduler.WAKE_MAX_SECONDS  # next minute
        with db.engine.begin() as conn:
            minute = conn.execute(
                text(
                    "UPDATE jobs_schedule SET next_run_at = date_trunc('minute', now()) - interval '2 min'"
                    " RETURNING next_run_at + interval '2 min'"
                )
            ).scalar_one()
        now = minute + timedelta(seconds=30)  # the clock held inside the slots' last minute
        assert part.step(now) == 0.0  # fired the three passed slots: look again at once
        assert part.step(now) == scheduler.WAKE_MAX_SECONDS  # the next slot is 30 s away
        assert part.step(now + timedelta(seconds=29.95)) == scheduler.WAKE_MIN_SECONDS
    with db.engine.connect() as conn:
        runs = conn.execute(
            text("SELECT count(*) FROM jobs_job WHERE idempotency_key LIKE 'schedule:tick:%'")
        )
        assert runs.scalar_one() == 3


def test_the_scheduler_is_a_worker_service_unless_schedules_are_off(app):
    on = Worker(app, WorkerSettings(threads=1))
    off = Worker(app, dataclasses.replace(WorkerSettings(threads=1), schedules=False))
    assert "scheduler" in [part.name for part in on.services] and on.scheduler is not None
    assert "scheduler" not in [part.name for part in off.services] and off.scheduler is None


@pytest.fixture
def own_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Types and schedules declared by a test are gone after it."""
    monkeypatch.setattr(handlers, "_registry", dict(handlers._registry))
    monkeypatch.setattr(handlers, "_defaults", dict(handlers._defaults))
    monkeypatch.setattr(schedules, "_registry", {})


@pytest.mark.usefixtures("own_registries")
def test_a_run_takes_its_handler_s_defaults_and_a_schedule_s_own_values_win(app):
    """As ``enqueue`` does: the schedule's queue, priority and attempts, else the type's
    ``@handler(...)`` defaults, else ``default``, 50 and the settings' attempts."""
    handlers.handler("mail.digest", queue="mail", priority=70, max_attempts=6)(lambda ctx: None)
    schedules.schedule("digest", cron="* * * * *", type="mail.digest")
    schedules.schedule(
        "urgent", cron="* * * * *", type="mail.digest", queue="urgent", priority=90, max_attempts=2
    )
    schedules.schedule("plain", cron="* * * * *", type="demo.success")
    scheduler.sync_declared(app, dataclasses.replace(WorkerSettings(), max_attempts_default=4))
    with app.app_context():
        fired = store.fire_due(now=utcnow() + timedelta(minutes=2))  # the clock moved past a slot
        assert sorted(one.name for one in fired) == ["digest", "plain", "urgent"]
        with db.engine.connect() as conn:
            runs = conn.execute(
                text(
                    "SELECT split_part(idempotency_key, ':', 2), queue, priority, max_attempts "
                    "FROM jobs_job ORDER BY 1"
                )
            ).all()
    assert [tuple(run) for run in runs] == [
        ("digest", "mail", 70, 6),
        ("plain", "default", 50, 4),
        ("urgent", "urgent", 90, 2),
    ]
