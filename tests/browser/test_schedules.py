"""The Schedules page in Chromium at both sizes, light and dark: it fits the screen and axe
finds nothing; an operator pauses a schedule, resumes it and runs it now."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dashboard.store import values
from dashboard.store.schedules import Declaration, fire_due, set_paused, sync

from .conftest import ARTIFACTS, CHROMIUM_ARGS
from .test_pages import SCHEMES, VIEWPORTS, _check

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NIGHTLY = Declaration(
    "nightly-report", "0 6 * * *", "Europe/Berlin", "reports.nightly", {"format": "pdf"}, "reports", 50, 3
)
TICK = Declaration(
    "crm-sync", "*/5 * * * *", "UTC", "demo.success", {"sleep_seconds": 0}, "default", 60, 5, "all"
)
PAUSED = Declaration("cleanup", "15 3 * * 1-5", "UTC", "maintenance.cleanup", {}, "default", 50, 3)
OLD = Declaration("legacy-export", "0 0 1 * *", "UTC", "legacy.export", {}, "default", 50, 3)


def seed() -> None:
    now = values.utcnow()
    sync([NIGHTLY, TICK, PAUSED, OLD], now=now - timedelta(hours=1))
    sync([NIGHTLY, TICK, PAUSED], now=now - timedelta(hours=1))  # legacy-export retired
    fire_due(now=now)  # crm-sync's twelve slots of the hour
    set_paused("cleanup", True, actor="olga")


def test_the_schedules_page_fits_and_passes_axe_light_and_dark(
    app: Any, dashboard_server: str, chromium: str
) -> None:
    from playwright.sync_api import sync_playwright

    seed()
    problems: list[str] = []
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            for size, viewport in VIEWPORTS.items():
                for scheme in SCHEMES:
                    context = browser.new_context(viewport=viewport, color_scheme=scheme, bypass_csp=True)
                    page = context.new_page()
                    response = page.goto(dashboard_server + "/schedules/")
                    assert response is not None and response.status == 200
                    _check(page, f"schedules-{size}-{scheme}", problems)
                    page.screenshot(path=str(ARTIFACTS / f"schedules-{size}-{scheme}.png"), full_page=True)
                    context.close()
        finally:
            browser.close()
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    "size", [pytest.param((1440, 900), id="desktop"), pytest.param((390, 844), id="phone")]
)
def test_an_operator_pauses_resumes_and_runs_a_schedule_now(
    app: Any, dashboard_server: str, browser_page: Any, size
) -> None:
    from playwright.sync_api import expect

    seed()
    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(dashboard_server + "/")
    page.get_by_role("link", name="Schedules").click()
    section = page.locator("#schedule-crm-sync")
    expect(section.locator("[data-field=words]")).to_have_text("Every fifth minute of every hour (UTC)")
    expect(section.locator("[data-field=next-runs] li")).to_have_count(5)
    expect(section.locator("tr[data-run]")).to_have_count(5)
    expect(page.locator("#schedule-legacy-export")).to_have_attribute("data-state", "retired")
    section.locator("[data-action=pause]").click()
    expect(page.locator(".notice-success")).to_contain_text("Schedule crm-sync paused")
    expect(section).to_have_attribute("data-state", "paused")
    expect(section.locator("[data-field=paused]")).to_contain_text("Paused")
    section.locator("[data-action=resume]").click()
    expect(section).to_have_attribute("data-state", "active")
    section.locator("[data-action=run-now]").click()
    expect(page.locator(".notice-success")).to_contain_text("a run was enqueued now")
    first = section.locator("tr[data-run]").first
    expect(first.locator("td[data-label=run]")).to_have_text("run now")
    first.locator("td[data-label=job] a").click()
    expect(page.locator("[data-field=schedule-link]")).to_have_text("crm-sync")
    page.locator("[data-field=schedule-link]").click()
    expect(page.locator("#schedule-crm-sync")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / f"schedules-actions-{size[0]}.png"))
    assert page.console_errors == []
