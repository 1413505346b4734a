"""The real ``flask worker`` reports in: its row, busy count, stale after SIGKILL,
stopped after a clean exit."""

from __future__ import annotations

import signal

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import enqueue, workers
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
    """Two threads hang past their lease: both are busy and stuck, whatever lease recovery does
    with their jobs; in batch mode the jobs claimed ahead for lanes are not counted as threads."""

    hung = {str(enqueue.create_job("demo.timeout", {"sleep_seconds": 30}).job.id) for _ in range(2)}
    for _ in range(6):
        enqueue.create_job("demo.slow", {"sleep_seconds": 30})  # claimed ahead in batch mode
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
