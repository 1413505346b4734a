"""``flask worker --processes N``: a supervisor and its worker processes, for real.

Its signals reach every child once and it exits 0 after the last; no child outlives it, even
when it is SIGKILLed; a child that dies is started again and the log says why; and the queue's
guarantees hold across the children: each attempt claimed once, a concurrency limit never
exceeded, a schedule's slot fired once. The children are read from ``/proc``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.flow import queues
from dashboard.store.flow.schedules import run_key
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from tests.ops.helpers import scrape, value
from tests.support.processes import children_of, running
from tests.support.stack import free_port
from tests.support.waiting import wait_until
from tests.support.worker_loop import event_types, job, wait_for_status
from tests.support.worker_process import WorkerProcess

from .test_flow_control import overlap_max
from .test_scheduler_process import MINUTE, fired_counts, rewind, runs_by_schedule

pytestmark = pytest.mark.process

SUCCEEDED = "jobqueue_worker_jobs_succeeded_total"


def started(worker: WorkerProcess, processes: int = 2) -> dict[int, int]:
    """Wait until the supervisor runs ``processes`` children, each heartbeating; returns their
    pids by index, from the supervisor's log."""
    for index in range(processes):
        worker.wait_for_output(f"started worker process {index} of {processes}")
    wait_until(lambda: len(children_of(worker.proc.pid)) == processes, 30, f"{processes} children")

    def beating() -> bool:
        with db.engine.connect() as conn:
            pids = conn.execute(text("SELECT pid FROM jobs_worker WHERE stopped_at IS NULL")).scalars()
            return children_of(worker.proc.pid) <= set(pids)

    wait_until(beating, 30, "every child's heartbeat")
    return child_pids(worker.output)


def child_pids(output: str) -> dict[int, int]:
    """The newest pid of each child index the supervisor logged."""
    return {
        int(i): int(pid)
        for i, pid in re.findall(r"started worker process (\d+) of \d+ \(pid (\d+)\)", output)
    }


def locked_pid(job_id) -> int:
    return int(job(job_id).locked_by.split(":")[1])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_every_child_as_a_single_worker_and_the_supervisor_exits_0(
    app, client, start_worker, sig
):
    worker = start_worker("--processes", "2", JOB_WORKER_LEASE_SECONDS="1")
    pids = started(worker)
    page = client.get("/workers/").get_data(as_text=True)  # each child a process row, tied to it
    assert page.count('data-field="supervised"') == 2
    assert (
        f"p0 of 2, supervisor {worker.proc.pid}" in page and f"p1 of 2, supervisor {worker.proc.pid}" in page
    )
    slow = enqueue.create_job(JobSpec("demo.slow", {"sleep_seconds": 1.5})).job
    wait_for_status(slow.id, "running")
    assert locked_pid(slow.id) in pids.values()  # a child's worker id, with the child's pid

    worker.send(sig)
    worker.wait_for_output(f"{sig.name} received: no new claims", count=2)  # each child once
    waiting = enqueue.create_job(JobSpec("demo.success", {"sleep_seconds": 0})).job

    assert worker.wait(timeout=30) == 0
    assert not any(running(pid) for pid in pids.values())
    finished = job(slow.id)
    assert finished.status == "succeeded" and finished.attempts == 1  # it was let finish
    assert event_types(waiting.id) == ["created"]  # nothing claimed after the signal
    output = worker.output
    assert output.count(f"{sig.name} received: no new claims") == 2, output  # never a second signal
    assert "second signal" not in output
    assert output.rstrip().endswith("supervisor stopped: every worker process has exited")


def test_no_child_outlives_a_supervisor_killed_with_sigkill(app, start_worker):
    worker = start_worker("--processes", "2")
    pids = started(worker)

    worker.send(signal.SIGKILL)
    worker.wait()

    wait_until(lambda: not any(running(pid) for pid in pids.values()), 20, "every child to exit")
    assert re.search(r"the supervisor .*is gone.*: no new claims", worker.output), worker.output


def test_a_child_that_dies_is_started_again_and_its_job_recovered_by_its_lease(app, start_worker):
    worker = start_worker("--processes", "2")
    pids = started(worker)
    slow = enqueue.create_job(JobSpec("demo.slow", {"sleep_seconds": 3})).job
    wait_for_status(slow.id, "running")
    victim = locked_pid(slow.id)

    os.kill(victim, signal.SIGKILL)

    def replaced() -> set[int]:
        now = children_of(worker.proc.pid)
        return now if len(now) == 2 and victim not in now else set()

    after = wait_until(replaced, 30, "a new child in place of the killed one")
    assert len(after - set(pids.values())) == 1
    worker.wait_for_output(f"(pid {victim}) was killed by SIGKILL; starting it again in ")
    done = wait_for_status(slow.id, "succeeded", timeout=30)  # recovered by its lease, run again
    assert done.attempts == 2
    types = event_types(slow.id)
    assert "timeout_requeued" in types and types[-1] == "succeeded"
    assert worker.proc.poll() is None  # the supervisor runs on


def ports_in_a_row(count: int) -> int:
    """A port free on 127.0.0.1 whose ``count - 1`` successors are free too."""
    for _ in range(50):
        first = free_port()
        with contextlib.ExitStack() as held:
            try:
                for port in range(first + 1, first + count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", port))
            except OSError:
                continue
        return first
    raise AssertionError(f"no {count} free ports in a row")


def test_two_processes_of_two_threads_claim_each_attempt_once(app, start_worker):
    port = ports_in_a_row(2)
    worker = start_worker("--processes", "2", "--threads", "2", "--metrics-port", str(port))
    pids = started(worker)
    jobs = 200
    enqueue.create_jobs([JobSpec("demo.success", {"sleep_seconds": 0.01}) for _ in range(jobs)])

    def all_done() -> bool:
        with db.engine.connect() as conn:
            return (
                conn.execute(text("SELECT count(*) FROM jobs_job WHERE status = 'succeeded'")).scalar_one()
                == jobs
            )

    wait_until(all_done, 90, f"{jobs} jobs to succeed")
    with db.engine.connect() as conn:
        attempts = conn.execute(text("SELECT attempts, count(*) FROM jobs_job GROUP BY attempts")).all()
        claims = conn.execute(
            text(
                "SELECT j.id, count(e.id) FROM jobs_job j JOIN jobs_jobevent e "
                "ON e.job_id = j.id AND e.type = 'claimed' GROUP BY j.id"
            )
        ).all()
        claimers = conn.execute(
            text(
                "SELECT DISTINCT split_part(worker_id, ':', 2)::int FROM jobs_jobevent WHERE type = 'claimed'"
            )
        ).scalars()
        claiming = set(claimers)
    assert attempts == [(1, jobs)]
    assert len(claims) == jobs and {count for _id, count in claims} == {1}
    assert claiming == set(pids.values())  # both children claimed, and nobody else
    # each child serves its own metrics, on the port + its index: together, every success
    counted = [
        value(scrape(f"http://127.0.0.1:{port + i}/metrics"), SUCCEEDED, type="demo.success") for i in (0, 1)
    ]
    assert all(counted) and sum(counted) == jobs, counted


def test_a_concurrency_limit_of_one_holds_across_the_children(app, start_worker):
    queues.set_limits("lim", concurrency_limit=1)
    jobs = 20
    enqueue.create_jobs([JobSpec("demo.success", {"sleep_seconds": 0.05}) for _ in range(jobs)], queue="lim")
    start_worker("--processes", "2", "--threads", "2", JOB_WORKER_POLL_INTERVAL_MS="20")

    def all_done() -> bool:
        with db.engine.connect() as conn:
            sql = text("SELECT count(*) FROM jobs_job WHERE queue = 'lim' AND status = 'succeeded'")
            return conn.execute(sql).scalar_one() == jobs

    wait_until(all_done, 60, "every limited job to succeed")
    assert overlap_max("lim") == 1


def test_a_due_schedule_is_fired_once_by_the_first_child_only(app, start_worker):
    env = {"JOB_HANDLER_MODULES": "tests.runtime.schedules_one", "JOB_WORKER_THREADS": "1"}
    worker = start_worker("--processes", "2", **env)
    pids = started(worker)
    assert worker.output.count("schedules: 1 declared") == 1  # synced once, by the supervisor
    start = rewind(["one"], 3)  # three passed slots and the current minute's
    wait_until(lambda: fired_counts()["one"][1] > start + 3 * MINUTE, 30, "the schedule to fire up to now")

    runs = runs_by_schedule()["one"]
    last = fired_counts()["one"][1] - MINUTE
    expected = [run_key("one", start + n * MINUTE) for n in range(int((last - start) / MINUTE) + 1)]
    assert [key for key, _worker in runs] == expected  # one job per slot, none missed
    assert fired_counts()["one"][0] == len(expected)
    assert {int(w.split(":")[1]) for _key, w in runs} == {pids[0]}
