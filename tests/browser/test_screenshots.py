"""The documentation's screenshots, taken from a real dashboard and a real worker on fixed data.

The same set of jobs every time (a few successes, a retried one, a failure, one running with
progress, one scheduled), run by a real ``flask worker`` with the demo handlers. Each main page
is shot at 1440x900 and 390x844 into ``test-artifacts/screenshots/``. The images the
documentation shows (``docs/assets/screenshots/``) are replaced with them when
``UPDATE_SCREENSHOTS=1`` is set or when one is missing, and must otherwise have the same
dimensions as the fresh ones: a page the docs show that no longer renders fails here.
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dashboard.store import values
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from tests.support.waiting import wait_until

from .conftest import ARTIFACTS, CHROMIUM_ARGS, PROJECT_ROOT, Process, _env, gunicorn

pytestmark = [pytest.mark.browser, pytest.mark.process]

DOCS_SHOTS = PROJECT_ROOT / "docs" / "assets" / "screenshots"
FRESH_SHOTS = ARTIFACTS / "screenshots"
VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
PAGES = ("overview", "jobs", "job", "events", "workers", "new-job")
DEMO = {"JOB_DEMO_HANDLERS": "true", "JOB_WORKER_LEASE_SECONDS": "30"}


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.fixture
def demo_worker(app: Any, libpq_url: str, tmp_path: Path) -> Iterator[Process]:
    process = Process(
        "worker",
        [sys.executable, "-m", "flask", "--app", "wsgi", "worker"],
        {**_env(libpq_url), **DEMO},
        tmp_path,
    )
    try:
        yield process
    finally:
        process.stop()


def seed_tour() -> dict[str, Any]:
    """The tour's jobs; returns the retried one (its page is the job page shown)."""
    now = values.utcnow()
    for n in range(6):
        enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0, "order": 1000 + n}))
    flaky = enqueue.create_job(enqueue.JobSpec("demo.flaky", {"fail_until_attempt": 2}, max_attempts=3)).job
    failed = enqueue.create_job(
        enqueue.JobSpec("demo.fail", {"error": "SMTP 550: mailbox unavailable"}, max_attempts=1)
    ).job
    slow = enqueue.create_job(enqueue.JobSpec("demo.slow", {"sleep_seconds": 600}, priority=5)).job
    enqueue.create_job(
        enqueue.JobSpec("demo.success", {"sleep_seconds": 0}, available_at=now + timedelta(hours=3))
    )
    return {"flaky": flaky, "failed": failed, "slow": slow}


def _settled(jobs: dict[str, Any]) -> bool:
    flaky = read_jobs.get_job(jobs["flaky"].id)
    failed = read_jobs.get_job(jobs["failed"].id)
    slow = read_jobs.get_job(jobs["slow"].id)
    return (
        flaky is not None
        and flaky.status == "succeeded"
        and failed is not None
        and failed.status == "failed"
        and slow is not None
        and slow.status == "running"
    )


def test_documentation_screenshots(
    app: Any, libpq_url: str, tmp_path: Path, chromium: str, demo_worker: Process
) -> None:
    from playwright.sync_api import sync_playwright

    jobs = seed_tour()
    wait_until(lambda: demo_worker.alive() and _settled(jobs), 60, "the tour's jobs to settle")
    FRESH_SHOTS.mkdir(parents=True, exist_ok=True)
    update = os.environ.get("UPDATE_SCREENSHOTS") == "1"
    taken: list[Path] = []
    with gunicorn(libpq_url, tmp_path, **DEMO) as base, sync_playwright() as playwright:
        urls = {
            "overview": base + "/",
            "jobs": base + "/jobs/",
            "job": f"{base}/jobs/{jobs['flaky'].id}/",
            "events": base + "/events/",
            "workers": base + "/workers/",
            "new-job": base + "/jobs/new/",
        }
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        errors: list[str] = []
        try:
            for size, viewport in VIEWPORTS.items():
                context = browser.new_context(viewport=viewport, color_scheme="light")
                context.set_default_timeout(20_000)
                page = context.new_page()
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                for name in PAGES:
                    response = page.goto(urls[name])
                    assert response is not None and response.status == 200, (name, response)
                    page.wait_for_load_state("networkidle")
                    assert page.locator("text=No live worker").count() == 0, f"{name}: no-worker banner"
                    path = FRESH_SHOTS / f"{name}-{size}.png"
                    page.screenshot(path=str(path))
                    taken.append(path)
                context.close()
        finally:
            browser.close()
    assert errors == [], errors
    DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
    for path in taken:
        width, height = png_size(path)
        size = path.stem.rsplit("-", 1)[1]
        assert (width, height) == (VIEWPORTS[size]["width"], VIEWPORTS[size]["height"]), path
        shown = DOCS_SHOTS / path.name
        if update or not shown.exists():
            shutil.copyfile(path, shown)
        assert png_size(shown) == (width, height), f"{shown} is not the size the browser shoots"
    referenced = (PROJECT_ROOT / "docs" / "dashboard.md").read_text()
    for path in taken:
        assert f"assets/screenshots/{path.name}" in referenced, f"docs/dashboard.md does not show {path.name}"
