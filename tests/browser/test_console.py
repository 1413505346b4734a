"""The operator console in a real browser at desktop and phone sizes: short-id search, dry run then
confirm bulk retry, cancel, run now, why-not-running, and a killed worker going stale."""

from __future__ import annotations

import os
import signal
import sys
from datetime import timedelta
from typing import Any

import pytest

from dashboard.store.reads import jobs as read_jobs
from dashboard.store.values import utcnow
from tests.support.factories import make_job

from .conftest import ARTIFACTS, Process, _env

pytestmark = [pytest.mark.browser, pytest.mark.slow]
VIEWPORTS = [pytest.param((1440, 900), id="desktop"), pytest.param((390, 844), id="phone")]


@pytest.mark.parametrize("size", VIEWPORTS)
def test_search_bulk_retry_cancel_run_now_and_why(
    app: Any, dashboard_server: str, browser_page: Any, size
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    now = utcnow()
    mail = [make_job("failed", type="mail.send", last_error="SMTP 451", finished_at=now) for _ in range(5)]
    other = make_job("failed", type="report.build", last_error="x", finished_at=now)
    later = make_job("queued", type="demo.success", available_at=now + timedelta(hours=3))
    waiting = make_job("queued", type="demo.success")

    # Short id in the header search box opens the job.
    page.goto(dashboard_server + "/jobs/")
    page.fill("#header-q", str(later.id)[:8])
    page.press("#header-q", "Enter")
    page.wait_for_url(f"**/jobs/{later.id}/")
    why = page.locator("[data-why=scheduled]")
    expect(why).to_contain_text("Scheduled for")
    expect(page.locator("li[data-why=no_worker]")).to_contain_text("No live worker has reported in")
    page.screenshot(path=str(ARTIFACTS / f"why-{size[0]}.png"), full_page=True)

    # Run now, then cancel, with the job's own buttons.
    page.click("[data-action=run-now]")
    expect(page.locator(".notice-success")).to_contain_text("due now")
    assert read_jobs.get_job(later.id).available_at <= utcnow()
    page.goto(f"{dashboard_server}/jobs/{waiting.id}/")
    expect(page.locator("li[data-why=no_worker]")).to_be_visible()
    # Cancel asks first: declined, nothing is posted; accepted, the job is cancelled.
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("[data-action=cancel]")  # returns once the dialog is answered
    assert len(asked) == 1 and asked[0].startswith("Cancel this job?")
    expect(page.locator(".notice-success")).to_have_count(0)
    assert read_jobs.get_job(waiting.id).status == "queued"
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-action=cancel]")
    expect(page.locator(".notice-success")).to_contain_text("Job cancelled.")
    assert read_jobs.get_job(waiting.id).last_error == "Cancelled by anonymous"

    # Bulk retry of a filtered set: the dry run's count is what the confirm changes.
    page.goto(dashboard_server + "/jobs/?status=failed&type=mail")
    expect(page.locator("td[data-field=error]").first).to_contain_text("SMTP 451")
    page.click("[data-bulk=retry]")
    count = page.locator("[data-bulk-count]")
    expect(count).to_have_attribute("data-bulk-count", "5")
    page.screenshot(path=str(ARTIFACTS / f"bulk-confirm-{size[0]}.png"), full_page=True)
    page.click("[data-confirm-bulk]")
    expect(page.locator(".notice-success")).to_contain_text("Retried 5 jobs.")
    assert [read_jobs.get_job(j.id).status for j in mail] == ["queued"] * 5
    assert read_jobs.get_job(other.id).status == "failed"
    assert page.console_errors == []


@pytest.mark.parametrize("size", VIEWPORTS)
def test_workers_page_shows_a_killed_worker_as_stale(
    app: Any, dashboard_server: str, browser_page: Any, libpq_url: str, tmp_path: Any, size
) -> None:
    from playwright.sync_api import expect

    env = {**_env(libpq_url), "JOB_WORKER_HEARTBEAT_SECONDS": "0.3"}
    worker = Process("worker", [sys.executable, "-m", "flask", "--app", "wsgi", "worker"], env, tmp_path)
    try:
        page = browser_page
        page.set_viewport_size({"width": size[0], "height": size[1]})
        page.goto(dashboard_server + "/workers/")
        row = page.locator(f"tr[data-worker$=':{worker.proc.pid}']")
        expect(row).to_have_attribute("data-state", "alive", timeout=20_000)
        os.kill(worker.proc.pid, signal.SIGKILL)
        expect(row).to_have_attribute("data-state", "stale", timeout=20_000)
        page.screenshot(path=str(ARTIFACTS / f"workers-stale-{size[0]}.png"), full_page=True)
    finally:
        worker.stop()
