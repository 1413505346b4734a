"""``flask schedules``: the list with next runs; pause, resume and run now by name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dashboard.store.flow.schedules import Declaration, fire_due, sync
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import schedules as read_schedules

T0 = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
NIGHTLY = Declaration("nightly", "0 6 * * *", "Europe/Berlin", "demo.success", {}, "reports", 50, 3)
TICK = Declaration("tick", "* * * * *", "UTC", "demo.success", {}, "default", 50, 3)


def test_the_list_shows_each_schedule_in_words_with_its_next_runs(app):
    sync([NIGHTLY, TICK], now=T0)
    fire_due(now=T0 + timedelta(minutes=1))
    result = app.test_cli_runner().invoke(args=["schedules"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("nightly  [active]  0 6 * * *  At 06:00 every day (Europe/Berlin)")
    assert "-> demo.success on reports; never run" in lines[0]
    assert lines[1:4] == [
        "    next 2026-06-02T04:00:00+00:00",
        "    next 2026-06-03T04:00:00+00:00",
        "    next 2026-06-04T04:00:00+00:00",
    ]
    assert "tick  [active]  * * * * *  Every minute (UTC)" in result.output
    assert "last run 2026-06-01T12:01:00+00:00 (queued)" in result.output


def test_pause_resume_and_run_by_name(app):
    sync([TICK], now=T0)
    runner = app.test_cli_runner()
    assert runner.invoke(args=["schedules", "pause", "tick"]).output == "tick: paused\n"
    found = read_schedules.get_schedule("tick")
    assert found is not None and found.paused and found.paused_by.startswith("cli")
    assert runner.invoke(args=["schedules", "resume", "tick"]).exit_code == 0
    assert not read_schedules.get_schedule("tick").paused
    ran = runner.invoke(args=["schedules", "run", "tick"])
    assert ran.exit_code == 0 and "enqueued (schedule:tick:" in ran.output
    job_id = ran.output.split("job ")[1].split(" ")[0]
    [created] = read_jobs.job_events(job_id)
    assert created.data["source"] == "cli" and created.data["run_now"] is True


def test_an_unknown_name_is_an_error_that_changes_nothing(app):
    runner = app.test_cli_runner()
    for action in ("pause", "resume", "run"):
        result = runner.invoke(args=["schedules", action, "nope"])
        assert result.exit_code == 1 and "no schedule named 'nope'" in result.output
    assert runner.invoke(args=["schedules"]).output.startswith("No schedules")
