"""Live pages that hold still, in Chromium at both sizes: one pause control on every live page,
kept across pages and reloads; a newest-first list says "N new jobs" instead of moving its rows;
a payload search is not re-run by polls; keyboard focus survives every poll, the pause button's,
a Workers link's and the overview's Retry's. Every wait has a deadline."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dashboard.store import values, workers
from dashboard.store.lifecycle import create as enqueue

from .conftest import wait_until
from .seed import fail_for_good

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SIZES = [{"width": 1440, "height": 900}, {"width": 390, "height": 844}]

# Counts the live parts' requests as htmx decides them: sent, or held back by the pause.
COUNT_POLLS_JS = """() => {
  window.__polls = {sent: 0, held: 0, paths: []};
  document.addEventListener('htmx:beforeRequest', (event) => {
    const elt = event.detail.elt;
    if (!elt.hasAttribute('data-poll')) return;
    setTimeout(() => {
      if (event.defaultPrevented) { window.__polls.held += 1; }
      else { window.__polls.sent += 1; window.__polls.paths.push(event.detail.pathInfo.requestPath); }
    }, 0);
  });
}"""


def _polls(page: Any) -> dict:
    return page.evaluate("window.__polls")


def _watch(page: Any, url: str) -> None:
    page.goto(url)
    page.evaluate(COUNT_POLLS_JS)


def _settled(page: Any) -> None:
    page.wait_for_function("() => !document.querySelector('.htmx-request, .htmx-settling, .htmx-swapping')")


def _wait_sent(page: Any, count: int) -> None:
    target = _polls(page)["sent"] + count
    wait_until(lambda: _polls(page)["sent"] >= target, 30, f"{count} more polls")
    _settled(page)


@pytest.mark.parametrize("viewport", SIZES, ids=["desktop", "phone"])
def test_pause_holds_across_pages_and_reloads_and_keeps_its_focus(
    app: Any, dashboard_server: str, browser_page: Any, viewport: dict[str, int]
) -> None:
    page = browser_page
    page.set_viewport_size(viewport)
    for path in ("/", "/jobs/", "/events/", "/workers/"):  # every live page has the control
        page.goto(dashboard_server + path)
        assert page.locator("[data-live-toggle]").count() == 1, path
        assert page.locator("[data-live-toggle]").is_visible(), path
    _watch(page, dashboard_server + "/jobs/")
    toggle = page.locator("[data-live-toggle]")
    toggle.focus()
    _wait_sent(page, 2)
    assert page.evaluate("document.activeElement.hasAttribute('data-live-toggle')")  # kept its focus
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "true" and toggle.inner_text() == "Resume live updates"
    held = _polls(page)["held"]
    wait_until(lambda: _polls(page)["held"] >= held + 2, 30, "two polls held back")
    assert page.evaluate("document.activeElement.hasAttribute('data-live-toggle')")
    for url in (dashboard_server + "/events/", dashboard_server + "/events/"):  # another page, a reload
        _watch(page, url)
        assert page.locator("[data-live-toggle]").get_attribute("aria-pressed") == "true"
        wait_until(lambda: _polls(page)["held"] >= 2, 30, "the pause to hold back polls")
        assert _polls(page)["sent"] == 0
    page.locator("[data-live-toggle]").click()
    assert page.locator("[data-live-toggle]").get_attribute("aria-pressed") == "false"
    _wait_sent(page, 1)
    assert page.console_errors == []


@pytest.mark.parametrize("viewport", SIZES, ids=["desktop", "phone"])
def test_a_newest_first_list_says_new_jobs_instead_of_moving_rows(
    app: Any, dashboard_server: str, browser_page: Any, viewport: dict[str, int]
) -> None:
    page = browser_page
    page.set_viewport_size(viewport)
    now = values.utcnow()
    for n in range(8):
        enqueue.create_job(enqueue.JobSpec("demo.success", {"n": n}, available_at=now + timedelta(hours=1)))
    _watch(page, dashboard_server + "/jobs/")
    rows = page.locator("#job-list tbody tr")
    before = rows.evaluate_all("rows => rows.map(r => r.dataset.job)")
    sixth = rows.nth(5).locator("a")
    sixth.focus()
    for n in range(3):
        enqueue.create_job(enqueue.JobSpec("demo.success", {"new": n}, available_at=now + timedelta(hours=1)))
    page.locator("[data-new-jobs='3']").wait_for(timeout=20_000)
    _wait_sent(page, 1)
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.job)") == before  # nothing moved
    assert page.evaluate("document.activeElement.closest('tr')?.dataset.job") == before[5]
    page.locator("[data-new-jobs]").click()
    page.wait_for_url("**/jobs/")
    assert rows.count() == 11

    # A payload search reads the newest 10,000 jobs: it is not re-run while it is open.
    for _ in range(2):
        enqueue.create_job(
            enqueue.JobSpec("demo.success", {"group": "a"}, available_at=now + timedelta(hours=1))
        )
    _watch(page, dashboard_server + "/jobs/?q=group=a")
    page.locator("[data-no-poll]").wait_for()
    wait_until(lambda: _polls(page)["sent"] >= 1, 30, "the banner's own poll")  # time passes
    assert not [p for p in _polls(page)["paths"] if p.startswith("/jobs/")]
    assert page.console_errors == []


@pytest.mark.parametrize("viewport", SIZES, ids=["desktop", "phone"])
def test_focus_survives_polls_on_the_workers_page_and_after_the_overviews_retry(
    app: Any, dashboard_server: str, browser_page: Any, viewport: dict[str, int]
) -> None:
    page = browser_page
    page.set_viewport_size(viewport)
    now = values.utcnow()
    me = workers.Identity("h:7:x", "h", 7, now, "one-job", 2, "1", 5.0, ("demo.success",))
    busy = {"threads": [{"thread": "thread-1", "job_id": "00000000-0000-4000-8000-000000000007",
                         "type": "demo.success", "attempt": 1, "since": now.isoformat(),
                         "lease_until": (now + timedelta(hours=1)).isoformat()}]}  # fmt: skip
    workers.beat(me, jobs_done=0, now=now, activity=busy)
    _watch(page, dashboard_server + "/workers/")
    link = page.locator("tr[data-thread] a").first
    link.focus()
    for _ in range(2):
        workers.beat(me, jobs_done=0, now=values.utcnow(), activity=busy)  # each poll carries a change
        _wait_sent(page, 1)
    assert page.evaluate("document.activeElement.closest('tr')?.dataset.thread") == "h:7:thread-1"

    failed = fail_for_good("demo.fail", "disk full")
    fail_for_good("demo.fail", "disk full again")
    _watch(page, dashboard_server + "/")
    retry = page.get_by_role("button", name=f"Retry job {str(failed.id)[:8]} (demo.fail)")
    retry.focus()
    page.keyboard.press("Enter")
    page.locator(f"#retry-{failed.id}").wait_for()
    _settled(page)
    assert page.evaluate("document.activeElement.id") == "failures-title"  # not <body>
    assert "queued again" in page.locator("#live-announce").inner_text()
    _wait_sent(page, 2)  # the overview's polls drop the notice: focus stays
    assert page.evaluate("document.activeElement.id") == "failures-title"
    assert page.console_errors == []
