"""The Queues page in Chromium at both sizes: pause and resume a queue from its row, the
state shown with who did it, and the job page saying why its job waits."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.store.flow import queues
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import queues as read_queues

pytestmark = [pytest.mark.browser, pytest.mark.slow]
VIEWPORTS = [
    pytest.param((1440, 900), "light", id="desktop-light"),
    pytest.param((390, 844), "dark", id="phone-dark"),
]


@pytest.mark.parametrize(("size", "scheme"), VIEWPORTS)
def test_pause_and_resume_from_the_queues_page(
    app: Any, dashboard_server: str, browser_page: Any, size, scheme
):
    from playwright.sync_api import expect

    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.emulate_media(color_scheme=scheme)
    queues.pause("hold")  # the page's worker claims nothing of it
    enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}, queue="hold"))
    page.goto(dashboard_server + "/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Queues").click()
    row = page.locator("tr[data-queue=hold]")
    expect(row).to_have_attribute("data-paused", "true")
    row.locator("[data-action=resume]").click()
    expect(page.locator(".notice-success")).to_contain_text("Queue hold resumed.")
    expect(page.locator("tr[data-queue=hold]")).to_have_attribute("data-paused", "false")
    assert not read_queues.get_queue("hold").paused
    page.locator("tr[data-queue=hold] [data-action=pause]").click()
    expect(page.locator(".notice-success")).to_contain_text("Queue hold paused.")
    paused = page.locator("tr[data-queue=hold]")
    expect(paused).to_have_attribute("data-paused", "true")
    expect(paused.locator("[data-field=state]")).to_contain_text("paused by")
    box = paused.locator("[data-action=resume]").bounding_box()
    assert box is not None and box["x"] + box["width"] <= size[0], box  # reachable on the screen
    job = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}, queue="hold")).job
    page.goto(f"{dashboard_server}/jobs/{job.id}/")
    expect(page.locator("[data-why=paused]")).to_contain_text("is paused")
    assert page.console_errors == []
