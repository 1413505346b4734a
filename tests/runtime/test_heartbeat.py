"""The real ``flask worker`` reports in: its row, busy count, stale after SIGKILL,
stopped after a clean exit."""

from __future__ import annotations

import signal

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import workers
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.values import utcnow
from tests.support.worker_loop import wait_until
from tests.support.worker_mode import batch_mode, worker_mode_env

pytestmark = pytest.mark.process  # real worker processes: CI runs these in batch mode too


def _rows():
    with db.engine.connect() as conn:
        return conn.execute(text("SELECT * FROM jobs_worker")).mappings().all()


def _state():
    return [w.state for w in workers.board(utcnow()).workers]


def test_worker_row_alive_then_stopped_on_clean_exit(app, start_worker):
    worker = start_worker(JOB_WORKER_HEARTBEAT_SECONDS="0.2")
    wait_until(lambda: _state() == ["alive"], 20, "the worker's heartbeat")
    row = _rows()[0]
    mode = f"batch of {worker_mode_env()['JOB_WORKER_BATCH_SIZE']}" if batch_mode() else "one-job"
    assert row["pid"] == worker.proc.pid and row["threads"] == 2 and row["mode"] == mode
    worker.send(signal.SIGTERM)
    assert worker.wait() == 0
    assert _state() == ["stopped"]


def test_killed_worker_turns_stale(app, start_worker):
    worker = start_worker(JOB_WORKER_HEARTBEAT_SECONDS="0.2")
    wait_until(lambda: _state() == ["alive"], 20, "the worker's heartbeat")
    worker.proc.kill()
    worker.proc.wait(10)
    wait_until(lambda: _state() == ["stale"], 20, "the row to go stale")


def test_busy_counts_threads_in_handlers_and_names_their_attempts(app, start_worker):
    """Two threads hang past their lease: both are busy and stuck, whatever the rescue does
    with their jobs; in batch mode the jobs claimed ahead for lanes are not counted as threads."""

    hung = {
        str(enqueue.create_job(enqueue.JobSpec("demo.timeout", {"sleep_seconds": 30})).job.id)
        for _ in range(2)
    }
    for _ in range(6):
        enqueue.create_job(enqueue.JobSpec("demo.slow", {"sleep_seconds": 30}))  # claimed ahead in batch mode
    worker = start_worker(JOB_WORKER_HEARTBEAT_SECONDS="0.2", JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS="0.5")

    def stuck() -> list[workers.ThreadView]:
        board = workers.board(utcnow())
        return [t for w in board.alive for t in w.stuck]

    wait_until(lambda: len(stuck()) == 2, 30, "both threads stuck past their lease")
    (view,) = workers.board(utcnow()).alive
    assert view.busy == 2 == view.threads
    assert {t.thread for t in view.thread_views} == {"thread-1", "thread-2"}
    assert {t.job_id for t in view.thread_views} == hung  # the hung attempts, not the jobs claimed ahead
    worker.proc.kill()
    worker.proc.wait(10)


def test_a_worker_records_its_queues_and_the_queue_it_does_not_serve_is_named(app, start_worker, client):
    """With only a ``--queues mail`` worker alive, a job in ``default`` waits for nobody: the job
    page, the banner and the Queues page say no live worker serves that queue."""
    waiting = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job  # in default
    mail = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}, queue="mail")).job
    start_worker("--queues", "mail", JOB_WORKER_HEARTBEAT_SECONDS="0.2")
    wait_until(lambda: _state() == ["alive"], 20, "the worker's heartbeat")
    assert _rows()[0]["queues"] == ["mail"]
    wait_until(lambda: read_jobs.get_job(mail.id).status == "succeeded", 20, "the mail job to run")
    job_page = client.get(f"/jobs/{waiting.id}/").get_data(as_text=True)
    assert 'data-why="no_queue_worker"' in job_page and "No live worker serves this queue" in job_page
    assert "Waiting for a free worker" not in job_page
    assert 'data-alarm="no_queue_worker"' in client.get("/").get_data(as_text=True)
    default_row = (
        client.get("/queues/").get_data(as_text=True).split('id="queue-default"')[1].split("</tr>")[0]
    )
    assert "no live worker serves this queue" in default_row
    assert read_jobs.get_job(waiting.id).status == "queued"  # and it is indeed not run
