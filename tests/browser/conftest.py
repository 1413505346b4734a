"""A real dashboard for the browser: gunicorn and a ``flask worker`` as subprocesses, Chromium.

Both processes use the session's test database (already migrated by the ``app`` fixture, which
also empties the tables before each test). Chromium is Debian's (``/usr/bin/chromium``):
Playwright cannot download its own here. Without it the tests skip, except in CI
(``CI=true``), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.open_access import OPEN_ACCESS
from tests.support.stack import free_port, healthy
from tests.support.waiting import wait_until

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM_PATH"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class Process:
    """A subprocess whose output goes to a log file, killed at teardown whatever happened."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(
            args, cwd=PROJECT_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.output}")
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


def _env(libpq_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOB_", "POSTGRES_"))}
    env.update(
        DATABASE_URL=libpq_url,
        AUTO_MIGRATE="false",
        DEBUG="false",
        ENABLE_DEBUG_TOOLBAR="false",
        **OPEN_ACCESS,
        TIME_ZONE="UTC",
        PYTHONUNBUFFERED="1",
        JOB_WORKER_THREADS="2",
        JOB_WORKER_POLL_INTERVAL_MS="50",
        JOB_WORKER_LEASE_SECONDS="3",
        JOB_WORKER_CLEANUP_INTERVAL_SECONDS="0.5",
        JOB_WORKER_BACKOFF_BASE_SECONDS="0.2",
        JOB_WORKER_BACKOFF_MAX_SECONDS="2",
        JOB_HANDLER_MODULES="",
    )
    return env


@pytest.fixture
def chromium() -> str:
    path = chromium_path()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Chromium is not installed (/usr/bin/chromium) and CI=true: browser tests must run")
        pytest.skip("Chromium is not installed (/usr/bin/chromium); install Debian's chromium to run this")
    return path


@contextmanager
def gunicorn(libpq_url: str, log_dir: Path, **env: str) -> Iterator[str]:
    """gunicorn serving ``wsgi:app`` on a free port with the test settings and ``env``; yields
    its base URL once it answers, stops it afterwards."""
    port = free_port()
    server = Process(
        "gunicorn",
        [sys.executable, "-m", "gunicorn", "-b", f"127.0.0.1:{port}", "wsgi:app"],
        {**_env(libpq_url), "WEB_CONCURRENCY": "1", "WEB_THREADS": "8", **env},
        log_dir,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: server.alive() and healthy(base), 30, "gunicorn to answer")
        yield base
    finally:
        server.stop()


@pytest.fixture
def dashboard_server(app: Any, libpq_url: str, tmp_path: Path) -> Iterator[str]:
    """The dashboard served by gunicorn on a free port; yields its base URL."""
    with gunicorn(libpq_url, tmp_path) as base:
        yield base


@pytest.fixture
def worker(app: Any, libpq_url: str, tmp_path: Path) -> Iterator[Process]:
    """A real ``flask --app wsgi worker`` with short leases and polls."""
    process = Process(
        "worker", [sys.executable, "-m", "flask", "--app", "wsgi", "worker"], _env(libpq_url), tmp_path
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def browser_page(chromium: str) -> Iterator[Any]:
    """A fresh Chromium page; console errors and failed responses collect on ``page.console_errors``."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(20_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.console_errors = errors  # type: ignore[attr-defined]
        try:
            yield page
        finally:
            context.close()
            browser.close()
