"""Worker processes that die at a chosen point of an attempt, and healthy ones (the ``workers`` fixture).

Every process a test starts is killed at teardown, whatever the test did to it. Settings are
small (lease 1 s, cleanup every 0.2 s, backoff from 0.1 s, one thread) so a crash is
recovered in about a second and each thread's work is one job at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.worker_mode import worker_mode_env

PROJECT_ROOT = Path(__file__).resolve().parents[2]

CRASH_SETTINGS = {
    "DEBUG": "false",
    "ENABLE_DEBUG_TOOLBAR": "false",
    "JOB_DEMO_HANDLERS": "true",  # demo types are off by default with DEBUG=false
    "AUTO_MIGRATE": "false",
    "JOB_WORKER_THREADS": "1",
    "JOB_WORKER_POLL_INTERVAL_MS": "50",
    "JOB_WORKER_LEASE_SECONDS": "1",
    "JOB_WORKER_CLEANUP_INTERVAL_SECONDS": "0.2",
    "JOB_WORKER_CLEANUP_BATCH_SIZE": "100",
    "JOB_WORKER_BACKOFF_BASE_SECONDS": "0.1",
    "JOB_WORKER_BACKOFF_MAX_SECONDS": "1",
    "JOB_WORKER_LOG_LEVEL": "INFO",
    "JOB_HANDLER_MODULES": "",
    # Progress reports stay pending until the attempt's settle (no timer flush within these
    # short attempts), so what a crash leaves behind does not depend on timing.
    "JOB_WORKER_PROGRESS_FLUSH_MS": "60000",
    "PYTHONUNBUFFERED": "1",
}


class WorkerProcess:
    """A worker subprocess; stdout and stderr go to one file, read on demand."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115  (closed in kill())
        self.proc = subprocess.Popen(
            argv, cwd=PROJECT_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_death(self, timeout: float = 20.0) -> int:
        """Wait for the process to end by itself; return its exit status."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker {self.pid} still alive after {timeout}s:\n{self.output}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def worker_env(libpq_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOB_", "POSTGRES_"))}
    env.update(CRASH_SETTINGS, DATABASE_URL=libpq_url)
    env.update(worker_mode_env())
    return env


@pytest.fixture
def workers(libpq_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """``workers(crash_at=None)`` starts ``flask --app wsgi worker`` on the test database.

    With ``crash_at`` it goes through ``crash_worker.py``, which SIGKILLs the process at that
    point of its first attempt; without, it is the plain command, a healthy worker.
    """
    started: list[WorkerProcess] = []

    def start(crash_at: str | None = None) -> WorkerProcess:
        if crash_at:
            argv = [sys.executable, "-m", "tests.runtime.crash_worker", crash_at]
        else:
            argv = [sys.executable, "-m", "flask", "--app", "wsgi", "worker"]
        log_path = tmp_path / f"worker-{len(started) + 1}-{crash_at or 'healthy'}.log"
        process = WorkerProcess(argv, worker_env(libpq_url), log_path)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
