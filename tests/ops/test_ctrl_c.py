"""Ctrl-C leaves nothing behind: a developer's next ``honcho start`` must find no stray process.

The README's run command is ``honcho start``. Ctrl-C sends SIGINT to honcho's process group;
honcho then sends SIGTERM to each process's group and SIGKILL 5 s later. With a ``demo.slow``
job running, no process of the instance folder (gunicorn, the worker, the embedded
PostgreSQL) may run 15 s later, and the next start must work.
"""

from __future__ import annotations

import shutil
import signal

import pytest

from tests.support.stack import (
    BIN,
    Started,
    free_port,
    healthy,
    http,
    kill_leftovers,
    nothing_left,
    run_job,
    stack_env,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.process

HONCHO = shutil.which("honcho", path=str(BIN))


def honcho(instance, port: int, log) -> Started:
    # honcho gives the first Procfile entry (web) PORT=<port>, the worker <port>+100.
    return Started([HONCHO, "start", "-p", str(port)], stack_env(INSTANCE_PATH=str(instance)), log)


def test_ctrl_c_during_a_slow_job_stops_every_process_and_the_next_start_works(tmp_path):
    assert HONCHO, "honcho is in requirements.txt"
    instance = tmp_path / "instance"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    first = honcho(instance, port, tmp_path / "first.log")
    try:
        wait_until(lambda: healthy(base), 60, "the first start to serve /api/health/")
        job = run_job(base, "demo.slow", {"sleep_seconds": 60}, ("running",), 30)

        first.signal_group(signal.SIGINT)  # what the terminal does on Ctrl-C
        first.wait(15)
        nothing_left(instance, 15)
        assert "handed back" in first.output, first.output[-3000:]

        second = honcho(instance, port, tmp_path / "second.log")
        try:
            wait_until(lambda: healthy(base), 60, "the second start to serve /api/health/")

            # The slow job was handed back at once, so the new worker runs it again: attempt 2.
            def claimed_again() -> bool:
                code, found = http("GET", f"{base}/api/jobs/{job['id']}/")
                return code == 200 and found["status"] == "running" and found["attempts"] >= 2

            wait_until(claimed_again, 30, "the handed-back job to be claimed again")
            run_job(base, "demo.success", {"sleep_seconds": 0}, ("succeeded",), 30)
            second.signal_group(signal.SIGINT)
            second.wait(15)
            nothing_left(instance, 15)
        finally:
            second.stop()
    finally:
        first.stop()
        kill_leftovers(instance)


def test_ctrl_c_stops_a_supervisor_and_every_worker_process_it_runs(tmp_path):
    """``JOB_WORKER_PROCESSES=2``: the worker line runs a supervisor and two worker processes,
    each in a session of its own, so Ctrl-C and honcho's SIGTERM reach the supervisor alone,
    which forwards one signal to each: the slow job is handed back, not cut short by a second."""
    instance = tmp_path / "instance"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = stack_env(INSTANCE_PATH=str(instance), JOB_WORKER_PROCESSES="2")
    started = Started([HONCHO, "start", "-p", str(port)], env, tmp_path / "honcho.log")
    try:
        wait_until(lambda: healthy(base), 60, "the start to serve /api/health/")
        ready = "dashboard.runtime.wakeup: listening for new jobs"
        wait_until(lambda: started.output.count(ready) >= 2, 60, "both worker processes to listen")
        run_job(base, "demo.slow", {"sleep_seconds": 60}, ("running",), 30)

        started.signal_group(signal.SIGINT)
        started.wait(15)
        nothing_left(instance, 15)
        output = started.output
        assert "handed back" in output, output[-3000:]
        assert output.count("SIGTERM received: no new claims") == 2, output[-3000:]  # one per child
        assert "second signal" not in output, output[-3000:]
        assert "supervisor stopped: every worker process has exited" in output, output[-3000:]
    finally:
        started.stop()
        kill_leftovers(instance)
