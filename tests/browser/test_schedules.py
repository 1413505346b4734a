"""The Schedules page in Chromium at both sizes, light and dark: it fits the screen and axe
finds nothing; an operator pauses a schedule, resumes it and runs it now; late and failing
schedules and a queue no live worker serves are shown on the overview, the Schedules page and
the Queues page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import values, workers
from dashboard.store.flow.schedules import Declaration, fire_due, set_paused, sync
from dashboard.store.lifecycle import create as enqueue
from tests.support.factories import make_job

from .conftest import ARTIFACTS
from .test_pages import _check, every_view

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NIGHTLY = Declaration(
    "nightly-report",
    "0 6 * * *",
    "Europe/Berlin",
    "reports.nightly",
    {"format": "pdf"},
    "reports",
    50,
    3,
    unique_key="reports:nightly:pdf",
    unique_for=5400.0,
    unique_while="active",
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
    seed()
    problems: list[str] = []
    for size, scheme, page in every_view(chromium):
        response = page.goto(dashboard_server + "/schedules/")
        assert response is not None and response.status == 200
        _check(page, f"schedules-{size}-{scheme}", problems)
        page.screenshot(path=str(ARTIFACTS / f"schedules-{size}-{scheme}.png"), full_page=True)
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
    expect(section.locator("[data-field=unique]")).to_have_count(0)  # shown only when set
    unique = page.locator("#schedule-nightly-report [data-field=unique]")
    expect(unique).to_contain_text("key reports:nightly:pdf, for 1 h 30 min, while queued or running")
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


def test_late_and_failing_schedules_and_a_queue_nobody_serves_are_shown_and_pass_axe(
    app: Any, dashboard_server: str, chromium: str
) -> None:
    """The overview's notices and banner, the Schedules page's late and failing schedules and the
    Queues page's unserved queue, at both sizes, light and dark."""
    from playwright.sync_api import expect

    now = values.utcnow()
    sync([NIGHTLY, TICK])  # their next runs after the database's now
    with db.engine.begin() as conn:  # no worker fired the nightly report for ten minutes
        conn.execute(
            text("UPDATE jobs_schedule SET next_run_at = :at WHERE name = :n"),
            {"at": now - timedelta(minutes=10), "n": NIGHTLY.name},
        )
    for minutes in (2, 1):  # crm-sync's last two runs failed
        at = now - timedelta(minutes=minutes)
        key = f"schedule:crm-sync:{at:%Y-%m-%dT%H:%M:%SZ}"
        make_job("failed", idempotency_key=key, now=at, last_error="CRMDown: 503 from crm.example.com")
    mail_only = workers.Identity("h:1:x", "h", 1, now, "one-job", 2, "1", 600.0, ("demo.success",), ("mail",))
    workers.beat(mail_only, jobs_done=0, now=now)  # alive for half an hour: serves mail only
    enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}))  # ready in default
    problems: list[str] = []
    for size, scheme, page in every_view(chromium):
        page.goto(dashboard_server + "/")
        expect(page.locator("[data-alarm=no_queue_worker]")).to_contain_text("default")
        notice = page.locator("[data-schedule-alerts]")
        expect(notice.locator("[data-health=late]")).to_contain_text("nightly-report")
        expect(notice.locator("[data-health=failing]")).to_contain_text("crm-sync")
        _check(page, f"attention-overview-{size}-{scheme}", problems)
        page.screenshot(path=str(ARTIFACTS / f"attention-overview-{size}-{scheme}.png"))
        notice.get_by_role("link", name="Schedules").click()
        expect(page.locator("#schedule-nightly-report [data-field=state]")).to_have_text("late")
        expect(page.locator("#schedule-crm-sync [data-field=failing]")).to_be_visible()
        _check(page, f"attention-schedules-{size}-{scheme}", problems)
        page.screenshot(path=str(ARTIFACTS / f"attention-schedules-{size}-{scheme}.png"), full_page=True)
        page.goto(dashboard_server + "/queues/")
        expect(page.locator("#queue-default [data-field=unserved]")).to_be_visible()
        _check(page, f"attention-queues-{size}-{scheme}", problems)
    assert problems == [], "\n".join(problems)
