"""Fixtures for tests that start the worker: the real ``flask --app wsgi worker`` as a subprocess.

Every process a test starts is killed at teardown, whatever the test did to it. Settings are
small (lease 2 s, cleanup every 0.2 s, backoff from 0.2 s) so the paths run in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dashboard.runtime.progress import Flusher
from tests.support.waiting import wait_until
from tests.support.worker_mode import worker_mode_env

PROJECT_ROOT = Path(__file__).resolve().parents[2]

FAST_SETTINGS = {
    "DEBUG": "false",
    "ENABLE_DEBUG_TOOLBAR": "false",
    "JOB_DEMO_HANDLERS": "true",  # demo types are off by default with DEBUG=false
    "JOB_WORKER_THREADS": "2",
    "JOB_WORKER_POLL_INTERVAL_MS": "50",
    "JOB_WORKER_LEASE_SECONDS": "2",
    "JOB_WORKER_CLEANUP_INTERVAL_SECONDS": "0.2",
    "JOB_WORKER_CLEANUP_BATCH_SIZE": "100",
    "JOB_WORKER_BACKOFF_BASE_SECONDS": "0.2",
    "JOB_WORKER_BACKOFF_MAX_SECONDS": "5",
    "JOB_WORKER_LOG_LEVEL": "INFO",
    "JOB_HANDLER_MODULES": "",
    # Progress reports are written with the settle, never by the timer: timelines are exact.
    "JOB_WORKER_PROGRESS_FLUSH_MS": "60000",
}


def subprocess_env(database_url: str, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOB_", "POSTGRES_"))}
    env.update(FAST_SETTINGS, DATABASE_URL=database_url, AUTO_MIGRATE="false", PYTHONUNBUFFERED="1")
    env.update(worker_mode_env())
    env.update(overrides)
    return env


class WorkerProcess:
    """A running ``flask worker``; its stdout and stderr go to one file, read on demand."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115  (closed in kill())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "wsgi", "worker", *args],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float = 15.0, count: int = 1) -> str:
        def seen() -> bool:
            if self.proc.poll() is not None and self.output.count(text) < count:
                raise AssertionError(
                    f"worker exited ({self.proc.returncode}) before logging {text!r}:\n{self.output}"
                )
            return self.output.count(text) >= count

        wait_until(seen, timeout, f"worker output {text!r} x{count}")
        return self.output

    def send(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 20.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker still running after {timeout}s:\n{self.output}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


@pytest.fixture
def start_worker(libpq_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """``start_worker(*cli_args, database_url=None, **env)`` starts a worker on the test database."""
    started: list[WorkerProcess] = []

    def start(*args: str, database_url: str | None = None, **env: str) -> WorkerProcess:
        log_path = tmp_path / f"worker-{len(started) + 1}.log"
        worker = WorkerProcess(list(args), subprocess_env(database_url or libpq_url, **env), log_path)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


@pytest.fixture
def flusher() -> Iterator[Flusher]:
    """A started progress flusher, as a worker starts it with its services; stopped after."""
    started = Flusher()
    started.start()
    yield started
    started.stop()
