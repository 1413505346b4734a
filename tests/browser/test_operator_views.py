"""The console's operator views in Chromium at both sizes: the no-worker banner first on every
page (and in the title), gone workers and their removal (last seen visible on a phone),
cancelled apart from failed, delete after a dry run, the retry warning, and the layout fixes
(type names whole, compact phone rows, titles with the filter, times instead of ISO text)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dashboard.store import values, workers
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from tests.support.factories import make_job

from .conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]
VIEWPORTS = [pytest.param((1440, 900), id="desktop"), pytest.param((390, 844), id="phone")]


def _alive(pid: int, types: tuple[str, ...]) -> workers.Identity:
    now = values.utcnow()
    me = workers.Identity(f"h:{pid}:x", "h", pid, now, "one-job", 2, "1", 5.0, types)
    workers.beat(
        me, jobs_done=0, now=now, activity={"threads": [{"thread": "thread-1"}, {"thread": "thread-2"}]}
    )
    return me


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_banner_is_the_first_thing_on_every_page_and_in_the_title(
    app: Any, dashboard_server: str, browser_page: Any, size
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    for _ in range(3):
        enqueue.create_job(enqueue.JobSpec("mail.send", {}))
    for path in ("/", "/jobs/", "/events/", "/workers/"):
        page.goto(dashboard_server + path)
        banner = page.locator("[data-alarm=no_worker]")
        expect(banner).to_be_visible()
        box = banner.bounding_box()
        assert box is not None and box["y"] < 10, (path, box)  # above everything, in the first screen
        assert page.title().startswith("⚠ No live worker · "), page.title()
    page.screenshot(path=str(ARTIFACTS / f"banner-{size[0]}.png"))
    _alive(1, ("demo.success",))  # alive, but no handler for mail.send
    expect(page.locator("[data-alarm=no_handler]")).to_contain_text("mail.send", timeout=20_000)
    page.wait_for_function("() => document.title.startsWith('⚠ No handler · ')")
    _alive(2, ("mail.send",))
    expect(page.locator("[data-alarm]")).to_have_count(0, timeout=20_000)
    page.wait_for_function("() => document.title === 'Workers · Job queue'")
    assert page.console_errors == []


@pytest.mark.parametrize("size", VIEWPORTS)
def test_gone_workers_sort_last_show_last_seen_and_can_be_removed(
    app: Any, dashboard_server: str, browser_page: Any, size
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    now = values.utcnow()
    for pid, seen in ((3, now - timedelta(hours=3)), (2, now - timedelta(seconds=40)), (1, now)):
        me = workers.Identity(f"h:{pid}:x", "h", pid, now - timedelta(hours=4), "one-job", 2, "1", 5.0, ())
        workers.beat(me, jobs_done=pid, now=seen)
    page.goto(dashboard_server + "/workers/")
    states = page.locator("table.workers tbody tr").evaluate_all("rows => rows.map(r => r.dataset.state)")
    assert states == ["alive", "stale", "gone"]
    for row in page.locator("table.workers tbody tr").all():
        seen = row.locator("[data-field=last-seen]")
        expect(seen).to_be_visible()
        box = seen.bounding_box()
        assert box is not None and box["x"] + box["width"] <= size[0], box  # on the screen, not scrolled off
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("tr[data-state=gone] [data-action=remove-worker]").click()
    expect(page.locator(".notice-success")).to_contain_text("Worker row removed")
    expect(page.locator("tr[data-state=gone]")).to_have_count(0)
    expect(page.locator("[data-action=remove-worker]")).to_have_count(0)  # alive and stale stay
    page.goto(dashboard_server + "/audit/")
    expect(page.locator("tr[data-audit=worker_removed]")).to_contain_text("h:3:x")
    assert page.console_errors == []


@pytest.mark.parametrize("size", VIEWPORTS)
def test_cancelled_apart_from_failed_retry_warns_and_delete_after_a_dry_run(
    app: Any, dashboard_server: str, browser_page: Any, size
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    cancelled = enqueue.create_job(enqueue.JobSpec("email.send", {})).job
    actions.run_one("cancel", cancelled.id, event_data={"actor": "olga"})
    failed = make_job("failed", type="email.send", last_error="SMTP 451", finished_at=values.utcnow())
    _alive(4, ("demo.success",))  # a live worker that cannot run email.send

    page.goto(dashboard_server + "/")
    expect(page.locator("[data-status=failed]")).to_have_text("1")
    expect(page.locator("[data-status=cancelled]")).to_have_text("1")
    page.locator("[data-status=failed]").click()
    page.wait_for_url("**/jobs/?status=failed&cancelled=false")
    assert page.title() == "Jobs: failed, not cancelled · Job queue"
    expect(page.locator("tbody tr")).to_have_count(1)
    page.select_option("#cancelled", "")
    page.locator("form.filters button[type=submit]").click()
    expect(page.locator("tbody tr .status-cancelled")).to_have_count(1)
    expect(page.locator("tbody tr .status-failed")).to_have_count(1)

    page.click("[data-bulk=retry]")
    expect(page.locator("[data-bulk-count]")).to_have_attribute("data-bulk-count", "1")
    expect(page.locator("[data-left-out='1']")).to_be_visible()
    expect(page.locator("[data-retry-warning=no_handler]")).to_contain_text("email.send")
    page.click("[data-left-out] a")  # include the cancelled job
    expect(page.locator("[data-bulk-count]")).to_have_attribute("data-bulk-count", "2")

    page.goto(f"{dashboard_server}/jobs/{failed.id}/")
    page.click("[data-action=delete]")
    expect(page.locator("[data-delete-count]")).to_be_visible()
    page.click("[data-confirm-delete]")
    expect(page.locator(".notice-success")).to_contain_text("deleted with its events")
    assert read_jobs.get_job(failed.id) is None
    page.goto(f"{dashboard_server}/jobs/?status=failed")
    page.click("[data-bulk=delete]")
    expect(page.locator("[data-bulk-count]")).to_have_attribute("data-bulk-count", "1")
    page.click("[data-confirm-bulk]")
    expect(page.locator(".notice-success")).to_contain_text("Deleted 1 job.")
    page.goto(dashboard_server + "/audit/")
    expect(page.locator("tr[data-audit=job_deleted]")).to_have_count(2)
    assert page.console_errors == []


@pytest.mark.parametrize("size", VIEWPORTS)
def test_layout_whole_type_names_compact_phone_rows_and_readable_times(
    app: Any, dashboard_server: str, browser_page: Any, size
) -> None:
    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    now = values.utcnow()
    error = "Lease expired at 2026-12-01T10:00:00.000000Z (worker h:1:thread-1:ab, attempt 3)"
    jobs = [
        make_job(
            "failed", type="email.send", last_error=error, finished_at=now, now=now - timedelta(seconds=n)
        )
        for n in range(25)
    ]
    page.goto(dashboard_server + "/jobs/?status=failed")
    cell = page.locator("tbody tr").first.locator("td[data-label=type]")
    lines = cell.evaluate(
        "td => { const r = document.createRange(); r.selectNodeContents(td);"
        " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; }"
    )
    assert lines == 1, "email.send broke across lines"
    height = page.locator("table.jobs").evaluate("t => t.getBoundingClientRect().height")
    if size[0] < 500:
        assert height < 3_000, height  # 25 jobs in compact rows (8,000-9,700 px before)
    page.goto(f"{dashboard_server}/jobs/{jobs[0].id}/")
    last_error = page.locator("section[aria-labelledby=error-title] pre")
    assert "T10:00:00" not in last_error.inner_text()
    assert "2026-12-01 10:00:00 UTC" in last_error.inner_text()
    assert page.title().startswith(f"Job {str(jobs[0].id)[:8]} · email.send")
    enqueue.create_job(enqueue.JobSpec("email.send", {}))  # an event of the feed
    page.goto(dashboard_server + "/events/")
    assert page.locator("td[data-label='job type']").first.inner_text() == "email.send"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert page.console_errors == []
