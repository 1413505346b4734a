"""``flask workflows``: show a workflow, cancel it, retry its failed jobs, each with its dry run."""

from __future__ import annotations

from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import workflows as read_workflows
from tests.support.timelines import table_snapshot


def chord(name: str = "nightly"):
    """Two members and a callback in workflow ``name``; the first member may run once."""
    return enqueue.create_jobs(
        [
            JobSpec("demo.success", workflow=name, max_attempts=1, priority=90),
            JobSpec("demo.success", workflow=name),
            JobSpec("demo.success", depends_on=(0, 1)),
        ]
    )


def fail_first() -> None:
    claimed = lifecycle.claim_next_job("w1", lease_seconds=30)
    assert claimed is not None
    lifecycle.fail_job(
        claimed.id, "w1", claimed.attempts, "boom", backoff_base_seconds=1, backoff_max_seconds=1
    )


def test_show_lists_the_counts_and_the_jobs_with_their_parents(app):
    a, b, callback = (result.job for result in chord())
    result = app.test_cli_runner().invoke(args=["workflows", "show", "nightly"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "workflow nightly: 3 jobs: 2 queued, 1 waiting"
    assert any(str(callback.id) in line and "waiting" in line and "waits for 2" in line for line in lines)
    assert any(
        str(callback.id) in line and f"after {str(a.id)[:8]}, {str(b.id)[:8]}" in line for line in lines
    )
    assert len(lines) == 4


def test_cancel_and_retry_with_their_dry_runs(app):
    _, b, _ = (result.job for result in chord())
    fail_first()  # the callback is cancelled with it
    runner = app.test_cli_runner()
    before = table_snapshot()
    dry = runner.invoke(args=["workflows", "cancel", "nightly", "--dry-run"])
    assert (dry.exit_code, dry.output) == (0, "workflow nightly: would cancel 1 jobs\n")
    dry = runner.invoke(args=["workflows", "retry", "nightly", "--dry-run"])
    assert dry.output == "workflow nightly: would retry 2 jobs\n"
    assert table_snapshot() == before
    done = runner.invoke(args=["workflows", "cancel", "nightly"])
    assert done.output == "workflow nightly: 1 jobs cancelled\n"
    counts = read_workflows.counts("nightly")
    assert (counts.queued, counts.failed, counts.cancelled) == (0, 1, 2)
    cancelled = read_jobs.get_job(b.id)
    assert cancelled.cancelled and cancelled.last_error.startswith("Cancelled by cli")
    retried = runner.invoke(args=["workflows", "retry", "nightly"])
    assert retried.output == "workflow nightly: 3 jobs retried\n"
    counts = read_workflows.counts("nightly")
    assert (counts.queued, counts.waiting, counts.failed, counts.cancelled) == (2, 1, 0, 0)
    for node in read_workflows.workflow("nightly").jobs:
        event = read_jobs.job_events(node.id)[-1]
        assert event.type == "manual_retry"
        assert event.data["source"] == "cli" and event.data["actor"].startswith("cli")
        assert event.data["workflow"] == "nightly"


def test_an_unknown_workflow_exits_1_and_a_bad_id_is_a_usage_error(app):
    runner = app.test_cli_runner()
    for command in ("show", "cancel", "retry"):
        unknown = runner.invoke(args=["workflows", command, "nobody"])
        assert unknown.exit_code == 1 and "no workflow 'nobody'" in unknown.output
        bad = runner.invoke(args=["workflows", command, "w" * 121])
        assert bad.exit_code == 2 and "WORKFLOW" in bad.output


def test_a_hosts_app_has_them_under_jobqueue():
    from dashboard.cli import jobqueue_group

    assert jobqueue_group.commands["workflows"].name == "workflows"
    assert set(jobqueue_group.commands["workflows"].commands) == {"show", "cancel", "retry"}
