"""Bulk retry, cancel and run now end in a bounded number of chunks, whatever the clock and the
workers do meanwhile.

Each test hands the action a clock (``now=`` a callable, read once per chunk) that moves, and
uses its readings to act between chunks as a worker or another operator would. The clock stops
the test with a failure after a few dozen readings, so an action that would loop fails instead
of hanging.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import lists as find_jobs

from .helpers import T0, at, claim, event_types, fail, fresh

MAX_READINGS = 40


def moving_clock(step: timedelta, between: Callable[[int], None] = lambda _: None) -> Callable[[], datetime]:
    """A clock that moves ``step`` per reading and calls ``between(reading)`` before answering."""
    readings = 0

    def now() -> datetime:
        nonlocal readings
        readings += 1
        assert readings <= MAX_READINGS, f"the action was still going after {MAX_READINGS} clock readings"
        between(readings)
        return T0 + step * readings

    return now


def test_run_now_ends_when_jobs_fall_due_while_it_runs(app):
    """Jobs that fall due between chunks were picked again and again, never changed: the
    selection used the action's start time and the change a later clock reading."""
    jobs = [
        enqueue.create_job(enqueue.JobSpec("demo.success", available_at=at(0.5 + i)), now=T0).job
        for i in range(6)
    ]
    late = enqueue.create_job(enqueue.JobSpec("demo.success", available_at=at(3600)), now=T0).job
    clock = moving_clock(timedelta(seconds=1))
    outcome = actions.run("run_now", actions.Selection(), event_data={}, chunk=2, now=clock)
    assert outcome.chunks <= 4
    assert fresh(late.id).available_at < at(3600)
    assert event_types(late.id) == ["created", "rescheduled"]
    for job in jobs:  # each one either fell due by itself or was made due, once
        assert event_types(job.id).count("rescheduled") <= 1
        assert fresh(job.id).available_at <= at(MAX_READINGS)


def test_run_now_ends_when_the_clock_goes_back(app):
    """A job made due at one reading is waiting again by an earlier one: it is not picked twice."""
    jobs = [
        enqueue.create_job(enqueue.JobSpec("demo.success", available_at=at(3600)), now=T0).job
        for _ in range(3)
    ]
    outcome = actions.run(
        "run_now", actions.Selection(), event_data={}, chunk=1, now=moving_clock(timedelta(seconds=-10))
    )
    assert (outcome.changed, outcome.chunks) == (3, 3)
    for job in jobs:
        assert event_types(job.id) == ["created", "rescheduled"]


def test_retry_ends_when_workers_fail_the_retried_jobs_again_with_a_clock_stepped_back(app):
    """Before each chunk a worker claims every retried job and fails it for good, its clock
    stepped back an hour in between (an NTP step): the job is failed again, with an
    ``updated_at`` before the action began. The same action does not retry it twice."""
    jobs = []
    for i in range(4):
        enqueue.create_job(enqueue.JobSpec("demo.fail", max_attempts=1), now=T0)
        jobs.append(fail(claim(f"w{i}"), f"w{i}"))
    assert all(job is not None and job.status == "failed" for job in jobs)

    def worker_stepped_back(_: int) -> None:
        while (job := claim("stepped-worker", now=at(3600))) is not None:
            fail(job, "stepped-worker", now=T0 - timedelta(hours=1))

    clock = moving_clock(timedelta(seconds=1), worker_stepped_back)
    outcome = actions.run("retry", actions.Selection(), event_data={}, chunk=1, now=clock)
    assert (outcome.changed, outcome.chunks) == (4, 4)
    for job in jobs:
        assert event_types(job.id).count("manual_retry") == 1
        assert fresh(job.id).status == "failed"  # failed again by the worker, and left so


def test_cancel_ends_when_an_operator_queues_the_cancelled_jobs_again(app):
    """Another operator, on a host whose clock is behind, retries each cancelled job before the
    next chunk: it is queued again, but this action does not cancel it a second time."""
    jobs = [enqueue.create_job(enqueue.JobSpec("demo.success"), now=T0).job for _ in range(4)]

    def operator_behind(_: int) -> None:
        for job in find_jobs.list_jobs(limit=10, offset=0, status="failed").results:
            actions.run_one("retry", job.id, now=T0 - timedelta(hours=1))

    clock = moving_clock(timedelta(seconds=1), operator_behind)
    outcome = actions.run("cancel", actions.Selection(), event_data={}, chunk=1, now=clock)
    assert (outcome.changed, outcome.chunks) == (4, 4)
    for job in jobs:
        assert event_types(job.id).count("cancelled") == 1


def test_a_fixed_now_still_changes_every_waiting_job_once(app):
    """``now=`` a time (not a clock) is the time of every chunk, as before."""
    jobs = [
        enqueue.create_job(enqueue.JobSpec("demo.success", available_at=at(60)), now=T0).job for _ in range(5)
    ]
    outcome = actions.run("run_now", actions.Selection(), event_data={"actor": "olga"}, chunk=2, now=T0)
    assert (outcome.changed, outcome.chunks) == (5, 3)
    for job in jobs:
        assert fresh(job.id).available_at == T0
        assert event_types(job.id) == ["created", "rescheduled"]
