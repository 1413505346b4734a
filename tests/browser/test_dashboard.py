"""The dashboard in a real browser, against a real server and a real worker."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs

from .conftest import ARTIFACTS, Process, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

JOB_URL = re.compile(r".*/jobs/([0-9a-f-]{36})/$")


def test_create_watch_retry_and_screenshots(
    app: Any, dashboard_server: str, worker: Process, browser_page: Any
) -> None:
    page = browser_page
    from playwright.sync_api import expect

    # Create a job through the form; htmx posts it and follows HX-Redirect to its page.
    page.goto(dashboard_server + "/jobs/new/")
    page.fill("#type", "demo.success")
    page.fill("#payload", '{"sleep_seconds": 1.5, "note": "<script>window.pwned = 1</script>"}')
    page.click("button[type=submit]")
    page.wait_for_url(JOB_URL)
    job_id = uuid.UUID(JOB_URL.match(page.url).group(1))
    expect(page.locator(".notice-success")).to_contain_text("Job created.")

    # The page is only ever swapped in place from here: a marker on window survives polling.
    page.evaluate("window.__sameDocument = true")
    detail = page.locator("#job-detail")
    expect(detail).to_have_attribute("data-status", "succeeded", timeout=30_000)
    timeline = page.locator(".timeline [data-event-type]")
    types = timeline.evaluate_all("els => els.map(e => e.dataset.eventType)")
    assert types[0] == "created" and "claimed" in types and types[-1] == "succeeded"
    assert "folded" in types  # its progress events, folded into one line
    assert page.evaluate("window.__sameDocument") is True
    # the payload is shown as text, never run
    expect(page.locator("pre.json").first).to_contain_text("<script>window.pwned = 1</script>")
    assert page.evaluate("window.pwned") is None
    assert read_jobs.get_job(job_id).status == "succeeded"
    page.screenshot(path=str(ARTIFACTS / "job-detail.png"), full_page=True)

    # A job that fails for good, then a retry with the button.
    failing = enqueue.create_job(enqueue.JobSpec("demo.fail", {"error": "disk <full>"}, max_attempts=1)).job
    wait_until(
        lambda: worker.alive() and read_jobs.get_job(failing.id).status == "failed", 30, "demo.fail to fail"
    )
    page.goto(f"{dashboard_server}/jobs/{failing.id}/")
    expect(page.locator("pre.error-text")).to_contain_text("disk <full>")
    page.evaluate("window.__sameDocument = true")
    page.click("#job-detail button:has-text('Retry')")
    expect(page.locator("#job-detail .notice-success")).to_contain_text("Job queued again")
    wait_until(
        lambda: [e.type for e in read_jobs.job_events(failing.id)].count("failed") == 2,
        30,
        "the retried job to fail",
    )
    manual = [e for e in read_jobs.job_events(failing.id) if e.type == "manual_retry"]
    assert len(manual) == 1 and manual[0].data.get("source") == "dashboard"
    # the detail polled while the job was live again, and stopped when it failed
    expect(page.locator("[data-event-type=manual_retry]")).to_have_count(1)
    expect(page.locator("[data-event-type=failed]")).to_have_count(2, timeout=30_000)
    expect(detail).to_have_attribute("data-status", "failed")
    assert page.evaluate("window.__sameDocument") is True

    # The overview: counts, chart, workers, the latest failure.
    page.goto(dashboard_server + "/")
    expect(page.locator('[data-status="succeeded"]')).to_have_text("1")
    expect(page.locator('[data-stat="chart_succeeded"]')).to_have_text("1")
    expect(page.locator('[data-stat="chart_failed"]')).to_have_text("2")
    expect(page.locator(f"#failure-{failing.id}")).to_contain_text("disk <full>")
    expect(page.locator("table.workers tbody tr").first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)

    # Phone width, dark mode: readable, nothing wider than the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    page.emulate_media(color_scheme="dark")
    page.goto(f"{dashboard_server}/jobs/{failing.id}/")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 22, 26)"
    page.screenshot(path=str(ARTIFACTS / "job-detail-phone-dark.png"), full_page=True)

    assert page.console_errors == []


# A job type as long as the API takes (120 characters), in one unbroken run of letters and dots.
LONG_TYPE = ("reports.build.quarterly-revenue-reconciliation.eu-west-1." * 3)[:120]


SIZES_AND_SCHEMES = [
    pytest.param((1440, 900), "light", id="desktop-light"),
    pytest.param((390, 844), "dark", id="phone-dark"),
]


@pytest.mark.parametrize("size, scheme", SIZES_AND_SCHEMES)
def test_long_names_never_widen_a_page(
    app: Any, dashboard_server: str, worker: Process, browser_page: Any, size, scheme
) -> None:
    """A long job type (the overview's per-type and run-time tables, the job list, the events)
    and a worker's id wrap inside their cells: no page scrolls sideways."""
    from playwright.sync_api import expect

    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.emulate_media(color_scheme=scheme)
    job = enqueue.create_job(
        enqueue.JobSpec(LONG_TYPE, max_attempts=1)
    ).job  # no handler: it fails, with a run time
    wait_until(lambda: worker.alive() and read_jobs.get_job(job.id).status == "failed", 30, "the job to fail")
    for path in ("/", "/jobs/?status=failed", f"/jobs/{job.id}/", "/events/", "/workers/"):
        page.goto(dashboard_server + path)
        if path == "/":
            expect(page.locator("table.runs")).to_contain_text(LONG_TYPE[:40])
            expect(page.locator("table.types")).to_contain_text(LONG_TYPE[:40])
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1] + 1, (path, width)
    page.screenshot(path=str(ARTIFACTS / f"long-type-overview-{size[0]}.png"), full_page=True)
    assert page.console_errors == []
