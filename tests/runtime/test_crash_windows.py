"""A worker SIGKILLed at each point of an attempt loses nothing: lease expiry recovers the job.

Each test starts the real ``flask --app wsgi worker`` through ``crash_worker.py``, which kills
the process at one point of its first attempt. The job is left running under a dead worker's
lease; a second, healthy worker process recovers it once the lease is over (its rescue pass),
runs it again and settles it. The timeline tells the whole story, and names the dead worker.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

import pytest

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.records import EventRecord
from tests.support.timelines import job, story, timeline, wait_until

from .crashing import WorkerProcess

pytestmark = pytest.mark.process

TERMINAL = ("succeeded", "failed")


@dataclass(frozen=True)
class Window:
    """Where the worker dies, the job it dies on, and how the job's story must read."""

    point: str
    job_type: str
    payload: dict[str, Any]
    max_attempts: int
    # Event types written before the SIGKILL. Progress reports wait for the attempt's settle
    # (or the flush timer, set long here), so a crash before the settle loses them; and the
    # lease is never half gone, so no renewal is sent.
    at_death: list[str]
    final_status: str
    final_story: list[tuple[str, int]]
    last_error: str = ""


RECOVERED_THEN_SUCCEEDED = [
    ("created", 0),
    ("claimed", 1),
    ("timeout_requeued", 1),
    ("claimed", 2),
    ("succeeded", 2),
]

WINDOWS = [
    Window(
        "after_claim",
        "demo.success",
        {"sleep_seconds": 0.2},
        3,
        ["created", "claimed"],
        "succeeded",
        RECOVERED_THEN_SUCCEEDED,
    ),
    Window(
        "in_handler",
        "demo.success",
        {"sleep_seconds": 0.2},
        3,
        ["created", "claimed"],
        "succeeded",
        RECOVERED_THEN_SUCCEEDED,
    ),
    Window(
        "before_complete",
        "demo.success",
        {"sleep_seconds": 0.2},
        3,
        ["created", "claimed"],
        "succeeded",
        RECOVERED_THEN_SUCCEEDED,
    ),
    Window(
        "before_fail",
        "demo.flaky",
        {"fail_until_attempt": 2},
        3,
        ["created", "claimed"],
        "succeeded",
        RECOVERED_THEN_SUCCEEDED,
    ),
    Window(
        "before_fail",
        "demo.fail",
        {"error": "boom"},
        2,
        ["created", "claimed"],
        "failed",
        [("created", 0), ("claimed", 1), ("timeout_requeued", 1), ("claimed", 2), ("failed", 2)],
        last_error="DemoError: boom",
    ),
]


def _only(events: list[EventRecord], event_type: str, attempt: int) -> EventRecord:
    [event] = [e for e in events if e.type == event_type and e.attempt == attempt]
    return event


def _worker_of(process: WorkerProcess) -> str:
    """The fragment every worker id of ``process`` contains (``host:pid:thread-N:random``, a
    thread's or, in batch mode, a lane's).

    Any thread of the process: its rescuer (``thread-0``) may be the one that recovers a lease.
    """
    return f":{process.pid}:"


def _crash(workers: Any, point: str) -> WorkerProcess:
    doomed = workers(crash_at=point)
    assert doomed.wait_for_death() == -signal.SIGKILL, doomed.output
    assert f"crash point {point} reached" in doomed.output, doomed.output
    return doomed


def _wait_terminal(job_id: Any) -> Any:
    return wait_until(lambda: (j := job(job_id)).status in TERMINAL and j, 20, f"job {job_id} to end")


@pytest.mark.parametrize("window", WINDOWS, ids=[f"{w.point}-{w.job_type}-{w.final_status}" for w in WINDOWS])
def test_a_worker_killed_mid_attempt_is_recovered_by_lease_expiry(app, workers, window):
    created = enqueue.create_job(
        enqueue.JobSpec(window.job_type, window.payload, max_attempts=window.max_attempts)
    ).job

    doomed = _crash(workers, window.point)

    # What the dead worker left behind: attempt 1, still running under its lease.
    assert [e.type for e in timeline(created.id)] == window.at_death
    stranded = job(created.id)
    dead_worker = _only(timeline(created.id), "claimed", 1).worker_id
    assert _worker_of(doomed) in dead_worker
    assert (stranded.status, stranded.attempts, stranded.locked_by) == ("running", 1, dead_worker)

    healthy = workers()
    final = _wait_terminal(created.id)

    assert final.status == window.final_status and final.attempts == 2
    assert final.last_error == window.last_error
    assert story(created.id) == window.final_story
    events = timeline(created.id)
    recovery = _only(events, "timeout_requeued", 1)
    assert _worker_of(healthy) in recovery.worker_id
    assert recovery.data["expired_worker_id"] == dead_worker
    assert recovery.message.startswith("Lease expired at ")
    assert recovery.message.endswith(f"(worker {dead_worker}, attempt 1)")
    assert recovery.created_at > stranded.locked_until  # recovered only once the lease was over
    second = _only(events, "claimed", 2)
    assert _worker_of(healthy) in second.worker_id
    assert {e.worker_id for e in events if e.attempt == 2} == {second.worker_id}
    if final.status == "succeeded":
        assert final.result["attempt"] == 2


def test_a_crash_on_the_last_attempt_fails_the_job_naming_the_dead_workers_lease(app, workers):
    created = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0.2}, max_attempts=1)).job
    doomed = _crash(workers, "in_handler")
    stranded = job(created.id)
    dead_worker = stranded.locked_by
    assert dead_worker and _worker_of(doomed) in dead_worker

    healthy = workers()
    final = _wait_terminal(created.id)

    assert final.status == "failed" and final.attempts == 1 and final.result is None
    assert final.last_error.startswith("Lease expired at ")
    assert final.last_error.endswith(f"(worker {dead_worker}, attempt 1)")
    assert story(created.id) == [("created", 0), ("claimed", 1), ("failed", 1)]
    failed = timeline(created.id)[-1]
    assert failed.message == final.last_error and failed.data["expired_worker_id"] == dead_worker
    assert _worker_of(healthy) in failed.worker_id
