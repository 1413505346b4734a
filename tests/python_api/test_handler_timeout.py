"""@handler(timeout=): the real worker fails an attempt past its deadline and refuses its late result."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from flask import Flask

from dashboard import jobs
from dashboard.store.reads import jobs as read_jobs
from tests.support.waiting import wait_until
from tests.support.worker_process import WorkerProcess, subprocess_env

pytestmark = pytest.mark.process

HANDLERS = "tests.python_api.timeout_handlers"


@pytest.fixture
def worker(libpq_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(**env: str) -> WorkerProcess:
        settings = {"JOB_HANDLER_MODULES": HANDLERS, "JOB_WORKER_LEASE_SECONDS": "30", **env}
        process = WorkerProcess([], subprocess_env(libpq_url, **settings), tmp_path / "worker.log")
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def test_an_attempt_past_its_timeout_is_failed_and_its_late_result_refused(
    app: Flask, worker: Callable[..., WorkerProcess]
) -> None:
    with app.app_context():
        job = jobs.enqueue("pyapi.overrun", {"sleep": 4}, max_attempts=1)
    process = worker()
    with app.app_context():
        failed = wait_until(
            lambda: (found := read_jobs.get_job(job.id)) is not None and found.status == "failed" and found,
            20,
            "the attempt failed by its timeout",
        )
        # The lease is 30 s and never expired: the deadline failed it.
        assert "ran past its timeout of 1s" in failed.last_error
        assert "timeout_requeued" not in [event.type for event in read_jobs.job_events(job.id)]
        process.wait_for_output("is no longer ours", timeout=20)  # the handler returned, 3 s later
        after = read_jobs.get_job(job.id)
        assert after is not None and after.status == "failed" and after.result is None
        assert after.last_error == failed.last_error
        kinds = [event.type for event in read_jobs.job_events(job.id)]
    assert kinds.count("failed") == 1 and "succeeded" not in kinds
    assert "ran past its timeout of 1s" in process.output
    process.send(signal.SIGTERM)
    assert process.wait() == 0


def test_a_handler_that_watches_ctx_lost_stops_and_the_job_is_retried(
    app: Flask, worker: Callable[..., WorkerProcess]
) -> None:
    with app.app_context():
        job = jobs.enqueue("pyapi.polite", max_attempts=2)
    process = worker(JOB_WORKER_THREADS="2")
    with app.app_context():
        done = wait_until(
            lambda: (found := read_jobs.get_job(job.id)) is not None and found.status == "failed" and found,
            30,
            "both attempts failed by their timeout",
        )
        assert done.attempts == 2 and "ran past its timeout of 1s" in done.last_error
        kinds = [event.type for event in read_jobs.job_events(job.id)]
    assert kinds.count("retry_scheduled") == 1 and kinds.count("failed") == 1
    process.wait_for_output("is no longer ours", timeout=10, count=2)
    process.send(signal.SIGTERM)
    assert process.wait() == 0
