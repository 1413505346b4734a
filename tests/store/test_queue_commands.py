"""`flask queues`: list, pause and resume from the command line."""

from __future__ import annotations

from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.flow import queues
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import queues as read_queues


def test_queues_list_pause_and_resume(app):
    runner = app.test_cli_runner()
    assert "No queues yet" in runner.invoke(args=["queues"]).output
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="mail"))
    queues.set_limits("mail", concurrency_limit=2)
    paused = runner.invoke(args=["queues", "pause", "mail"])
    assert paused.exit_code == 0 and "mail: paused" in paused.output
    assert "already paused" in runner.invoke(args=["queues", "pause", "mail"]).output
    listing = runner.invoke(args=["queues", "list"]).output
    line = next(row for row in listing.splitlines() if row.startswith("mail"))
    assert "paused" in line and "concurrency 0/2" in line
    assert "resumed" in runner.invoke(args=["queues", "resume", "mail"]).output
    assert not read_queues.get_queue("mail").paused
    with db.engine.connect() as conn:
        actors = list(
            conn.execute(text("SELECT actor FROM jobs_audit WHERE action LIKE 'queue_p%'")).scalars()
        )
    assert actors and all(actor.startswith("cli") for actor in actors)


def test_an_invalid_name_is_refused_and_changes_nothing(app):
    result = app.test_cli_runner().invoke(args=["queues", "pause", "no way"])
    assert result.exit_code == 2 and "NAME" in result.output
    assert read_queues.list_queues() == []
