"""Live refresh in Chromium, at both sizes: focus and a text selection survive two refresh
cycles (morph swaps), a long job's polls stay small, and the overview's queue split and
oldest-ready wait match jobs made for the purpose. Every wait has a deadline; no sleeps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dashboard.store import lifecycle, values
from dashboard.store.lifecycle import create as enqueue

from .conftest import wait_until
from .seed import add_progress, fail_for_good, run_long

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SIZES = [{"width": 1440, "height": 900}, {"width": 390, "height": 844}]
POLL_LIMIT_BYTES = 10 * 1024

SELECT_JS = """selector => {
  const node = document.querySelector(selector);
  const range = document.createRange();
  range.selectNodeContents(node);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  return selection.toString();
}"""


def _polls(page: Any, fragment: str) -> list[tuple[int, int]]:
    """(status, body size) of every poll whose URL contains ``fragment``, as they arrive."""
    seen: list[tuple[int, int]] = []

    def on_response(response: Any) -> None:
        if fragment in response.url and response.request.headers.get("hx-request") == "true":
            seen.append((response.status, len(response.body())))

    page.on("response", on_response)
    return seen


def _wait_polls(page: Any, seen: list[Any], count: int, between: Any = None) -> None:
    """Wait until ``count`` more polls have been answered and swapped in; ``between`` runs
    after each one (to make the next refresh carry a change)."""
    for _ in range(count):
        target = len(seen) + 1
        wait_until(lambda t=target: page.evaluate("1") and len(seen) >= t, 30, "a refresh")
        page.wait_for_function(
            "() => !document.querySelector('.htmx-request, .htmx-settling, .htmx-swapping')"
        )
        if between:
            between()


@pytest.mark.parametrize("viewport", SIZES, ids=["desktop", "phone"])
def test_long_job_page_keeps_place_and_polls_small(
    app: Any, dashboard_server: str, browser_page: Any, viewport: dict[str, int]
) -> None:
    page = browser_page
    page.set_viewport_size(viewport)
    page.emulate_media(color_scheme="dark" if viewport["width"] < 500 else "light")
    job = run_long(480, payload={"sleep_seconds": 240, "note": "select me"})
    polls = _polls(page, f"/jobs/{job.id}/live/")
    page.goto(f"{dashboard_server}/jobs/{job.id}/")
    page.locator("#job-live [data-field=progress]").wait_for()
    assert "480 progress" in page.locator("#timeline-tail [data-fold] summary").inner_text()

    link = page.locator("#job-live a[data-field=activity]")
    link.focus()
    selected = page.evaluate(SELECT_JS, "pre[data-label=payload]")
    assert "select me" in selected
    progress = page.locator("#job-live [data-field=progress]")
    before = progress.inner_text()
    step = iter(range(480, 10_000, 40))
    _wait_polls(page, polls, 2, between=lambda: add_progress(job, 40, next(step)))
    _wait_polls(page, polls, 1)
    assert progress.inner_text() != before  # the header did change under the focus
    assert page.evaluate("document.activeElement.dataset.field") == "activity"
    assert page.evaluate("window.getSelection().toString()") == selected
    assert all(status == 200 for status, _ in polls), polls
    assert max(size for _, size in polls) < POLL_LIMIT_BYTES, polls
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert page.console_errors == []


@pytest.mark.parametrize("viewport", SIZES, ids=["desktop", "phone"])
def test_overview_split_matches_and_keeps_place(
    app: Any, dashboard_server: str, browser_page: Any, viewport: dict[str, int]
) -> None:
    page = browser_page
    page.set_viewport_size(viewport)
    page.emulate_media(color_scheme="light" if viewport["width"] < 500 else "dark")
    failed = fail_for_good("demo.fail", "disk full: keep this selected")
    now = values.utcnow()
    # retrying: tried once, backing off until later
    retried = enqueue.create_job(enqueue.JobSpec("demo.flaky", {}, max_attempts=3)).job
    (claimed,) = lifecycle.claim_jobs("seed-worker", lease_seconds=60)
    assert claimed.id == retried.id
    lifecycle.fail_job(
        retried.id, "seed-worker", 1, "once", backoff_base_seconds=3600, backoff_max_seconds=3600
    )
    oldest = enqueue.create_job(
        enqueue.JobSpec("demo.success", {}, available_at=now - timedelta(minutes=90))
    ).job
    for minutes in (30, 5):
        enqueue.create_job(enqueue.JobSpec("demo.success", {}, available_at=now - timedelta(minutes=minutes)))
    for hours in (1, 24):
        enqueue.create_job(enqueue.JobSpec("demo.slow", {}, available_at=now + timedelta(hours=hours)))

    polls = _polls(page, "/")
    page.goto(dashboard_server + "/")
    stat = page.locator
    assert stat("[data-stat=ready]").inner_text() == "3"
    assert stat("[data-stat=scheduled]").inner_text() == "2"
    assert stat("[data-stat=retrying]").inner_text() == "1"
    wait = stat("[data-stat=oldest_ready_wait] time")
    assert wait.get_attribute("datetime") == oldest.available_at.isoformat()
    assert wait.inner_text() in ("1 h 30 min", "1 h 31 min")
    assert stat("tr[data-type='demo.success'] td[data-label=ready]").inner_text() == "3"

    retry = page.get_by_role("button", name=f"Retry job {str(failed.id)[:8]} (demo.fail)")
    retry.focus()
    selected = page.evaluate(SELECT_JS, f"#failure-{failed.id} pre.error-text")
    assert selected == "disk full: keep this selected"
    polls.clear()  # from here: the overview's own polls
    added = iter([1, 2])
    _wait_polls(
        page,
        polls,
        2,
        between=lambda: enqueue.create_job(
            enqueue.JobSpec("demo.success", {"n": next(added)}, available_at=now)
        ),
    )
    _wait_polls(page, polls, 1)
    assert stat("[data-stat=ready]").inner_text() == "5"  # the refreshes did change the page
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == retry.get_attribute(
        "aria-label"
    )
    assert page.evaluate("window.getSelection().toString()") == selected
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert page.console_errors == []
