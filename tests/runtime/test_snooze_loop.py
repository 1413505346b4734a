"""A handler's Snooze through the runner, in-process: recorded as snoozed (the metrics count
it), and a snooze from an attempt the worker lost meanwhile changes nothing."""

from __future__ import annotations

from dashboard.jobs import Snooze
from dashboard.ops import worker_metrics
from dashboard.runtime.handlers import JobContext
from dashboard.runtime.runner import End
from dashboard.store.lifecycle import create as enqueue
from tests.support.worker_loop import SETTINGS, event_types, job, lose_to_another_worker, one_job_loop

WORKER = "testhost:1:thread-1:5a0e0001"


def test_a_snooze_is_recorded_and_counted(app):
    def snoozing(ctx: JobContext) -> None:
        raise Snooze(120)

    queued = enqueue.create_job(enqueue.JobSpec("test.snooze")).job
    loop = one_job_loop(app, SETTINGS, WORKER, lookup={"test.snooze": snoozing}.get)
    counter = worker_metrics.SNOOZED.labels("test.snooze")
    before = counter._value.get()
    [claimed] = loop.claim()
    outcome = loop.runner.run(claimed)
    assert outcome is not None and outcome.end is End.SNOOZED and outcome.error == ""
    after = job(queued.id)
    assert (after.status, after.attempts, after.snoozes, after.max_attempts) == ("queued", 1, 1, 4)
    assert (after.available_at - after.updated_at).total_seconds() == 120
    assert counter._value.get() == before + 1
    assert event_types(queued.id) == ["created", "claimed", "snoozed"]


def test_a_snooze_from_a_lost_attempt_changes_nothing(app):
    taken = {}

    def snoozing_late(ctx: JobContext) -> None:
        taken["job"] = lose_to_another_worker(ctx)  # the lease ran out; another worker claimed it
        raise Snooze(0)

    queued = enqueue.create_job(enqueue.JobSpec("test.snooze")).job
    loop = one_job_loop(app, SETTINGS, WORKER, lookup={"test.snooze": snoozing_late}.get)
    [claimed] = loop.claim()
    outcome = loop.runner.run(claimed)
    assert outcome is not None and outcome.end is End.LOST
    now = job(queued.id)
    assert now.status == "running" and now.locked_by == "other-worker" and now.attempts == 2
    assert now.snoozes == 0 and "snoozed" not in event_types(queued.id)
