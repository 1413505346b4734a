"""Every page in Chromium at a desktop and a phone size, light and dark: nothing wider than the
screen, and axe-core (vendored in tests/browser/vendor/, never served) finds no accessibility
violation at all, of any impact."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import ARTIFACTS, CHROMIUM_ARGS
from .seed import seed_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AXE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text()
VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
SCHEMES = ("light", "dark")

OVERFLOW_JS = """() => {
  const limit = window.innerWidth;
  const wide = [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > limit + 1 && getComputedStyle(e).position !== 'fixed')
    .filter(e => !e.closest('.scroll, pre, table'))
    .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
  return {scrollWidth: document.documentElement.scrollWidth, innerWidth: limit, wide};
}"""

AXE_JS = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' + n.failureSummary)}));
}"""


def _pages(base: str, seeded: Any) -> list[tuple[str, str]]:
    return [
        ("overview", base + "/"),
        ("jobs", base + "/jobs/"),
        ("jobs-failed", base + "/jobs/?status=failed"),
        ("jobs-type", base + "/jobs/?type=demo&limit=1"),
        ("jobs-bad-filter", base + "/jobs/?status=nope&offset=x"),
        ("job-failed", f"{base}/jobs/{seeded.failed.id}/"),
        ("job-running", f"{base}/jobs/{seeded.running.id}/"),
        ("job-ready", f"{base}/jobs/{seeded.ready_old.id}/"),
        ("new", base + "/jobs/new/"),
        ("events", base + "/events/"),
        ("events-filtered", f"{base}/events/?type=progress&type=failed&job_id={seeded.running.id}"),
        ("events-chatter", base + "/events/?chatter=1"),
        ("workers", base + "/workers/"),
        ("queues", base + "/queues/"),
        ("jobs-queue", base + "/jobs/?queue=reports"),
        ("audit", base + "/audit/"),
        ("jobs-cancelled", base + "/jobs/?cancelled=true"),
        ("jobs-failures", base + "/jobs/?status=failed&cancelled=false"),
        ("jobs-search", f"{base}/jobs/?q=n=1"),
        ("job-cancelled", f"{base}/jobs/{seeded.cancelled.id}/"),
        ("job-orphan", f"{base}/jobs/{seeded.orphan.id}/"),
        ("job-delete", f"{base}/jobs/{seeded.failed.id}/delete/"),
        ("job-deleted-404", f"{base}/jobs/00000000-0000-4000-8000-00000000dead/"),
        ("bulk-retry", base + "/jobs/bulk/retry/?status=failed"),
        ("bulk-cancel", base + "/jobs/bulk/cancel/"),
        ("bulk-run-now", base + "/jobs/bulk/run-now/"),
        ("bulk-delete", base + "/jobs/bulk/delete/?status=succeeded"),
        ("bulk-refused", base + "/jobs/bulk/retry/?status=queued"),
        ("api-docs", base + "/api/docs/"),
        ("signin", base + "/login/"),
    ]


def every_view(chromium: str, *, timeout_ms: int | None = None) -> Iterator[tuple[str, str, Any]]:
    """``(size, scheme, page)`` for each viewport in each colour scheme, each page in a context of
    its own (closed when the caller moves on), the browser closed at the end."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            for size, viewport in VIEWPORTS.items():
                for scheme in SCHEMES:
                    context = browser.new_context(viewport=viewport, color_scheme=scheme, bypass_csp=True)
                    if timeout_ms is not None:
                        context.set_default_timeout(timeout_ms)
                    try:
                        yield size, scheme, context.new_page()
                    finally:
                        context.close()
        finally:
            browser.close()


def _check(page: Any, name: str, problems: list[str]) -> None:
    page.wait_for_load_state("load")
    box = page.evaluate(OVERFLOW_JS)
    if box["scrollWidth"] > box["innerWidth"] + 1 or box["wide"]:
        problems.append(f"{name}: {box['scrollWidth']}px wide in {box['innerWidth']}px: {box['wide']}")
        page.screenshot(path=str(ARTIFACTS / f"overflow-{name}.png"), full_page=True)
    page.evaluate(AXE)  # the page's CSP is bypassed in this context only, for axe
    for violation in page.evaluate(AXE_JS):  # any impact, minor included
        problems.append(f"{name}: axe {violation['impact']} {violation['id']}: {violation['nodes']}")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_every_page_fits_and_passes_axe(app: Any, dashboard_server: str, chromium: str, size: str) -> None:
    from playwright.sync_api import sync_playwright

    seeded = seed_pages()
    problems: list[str] = []
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            viewport = VIEWPORTS[size]
            for scheme in SCHEMES:
                context = browser.new_context(viewport=viewport, color_scheme=scheme, bypass_csp=True)
                context.set_default_timeout(20_000)
                page = context.new_page()
                for name, url in _pages(dashboard_server, seeded):
                    response = page.goto(url)
                    assert response is not None and response.status < 500, (name, response)
                    page.wait_for_function("document.readyState === 'complete'")
                    _check(page, f"{name}-{size}-{scheme}", problems)
                # the create form refused: errors next to their fields
                page.goto(dashboard_server + "/jobs/new/")
                page.fill("#type", "demo.success")  # free text: any type may be enqueued
                page.fill("#payload", "{not json")
                page.fill("#priority", "99999")
                page.click("button[type=submit]")
                page.locator("#payload[aria-invalid=true]").wait_for()
                # focus moves when htmx settles the swap, a moment after the new form is in
                page.wait_for_function("document.activeElement?.id === 'payload'", timeout=5_000)
                _check(page, f"new-errors-{size}-{scheme}", problems)
                context.close()
        finally:
            browser.close()
    assert problems == [], "\n".join(problems)
