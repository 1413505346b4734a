"""Keyboard users keep their place: after Pause / Resume or Save limits on the Queues page, and
Pause / Resume on the Schedules page, the focus is on the same control again (the answer
replaces the page, and with it the button that had the focus)."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.store import values
from dashboard.store.flow import queues
from dashboard.store.flow.schedules import Declaration, sync
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import queues as read_queues

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TICK = Declaration("crm-sync", "*/5 * * * *", "UTC", "demo.success", {}, "default", 60, 5)


def _press(page: Any, selector: str) -> None:
    """Focus the control with the keyboard's own means and press Enter on it."""
    page.locator(selector).focus()
    page.keyboard.press("Enter")


def _focused_on(page: Any, element_id: str) -> None:
    page.wait_for_function("id => document.activeElement && document.activeElement.id === id", arg=element_id)


SIZES = [pytest.param((1440, 900), id="desktop"), pytest.param((390, 844), id="phone")]


@pytest.mark.parametrize("size", SIZES)
def test_the_focus_comes_back_to_the_queue_control_pressed(
    app: Any, dashboard_server: str, browser_page: Any, size
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    page.set_viewport_size({"width": size[0], "height": size[1]})
    queues.pause("hold")  # the page's worker claims nothing of it
    enqueue.create_job(enqueue.JobSpec("demo.success", {}, queue="hold"))
    page.goto(dashboard_server + "/queues/")
    toggle = "#toggle-queue-hold"
    expect(page.locator(toggle)).to_have_attribute("data-action", "resume")

    _press(page, toggle)
    expect(page.locator(".notice-success")).to_contain_text("Queue hold resumed.")
    _focused_on(page, "toggle-queue-hold")
    expect(page.locator(toggle)).to_have_attribute("data-action", "pause")  # its equivalent: now Pause
    expect(page.locator(toggle)).to_be_focused()

    page.keyboard.press("Enter")  # the focus is there: Enter again pauses
    expect(page.locator(".notice-success")).to_contain_text("Queue hold paused.")
    _focused_on(page, "toggle-queue-hold")
    assert read_queues.get_queue("hold").paused

    page.locator("#save-limits-hold").scroll_into_view_if_needed()
    page.locator("[data-limits=hold] input[name=concurrency_limit]").fill("3")
    _press(page, "#save-limits-hold")
    expect(page.locator(".notice-success")).to_contain_text("Limits of queue hold saved.")
    _focused_on(page, "save-limits-hold")
    assert read_queues.get_queue("hold").concurrency_limit == 3
    assert page.console_errors == []


def test_the_focus_comes_back_to_the_schedule_control_pressed(
    app: Any, dashboard_server: str, browser_page: Any
) -> None:
    from playwright.sync_api import expect

    sync([TICK], now=values.utcnow())
    page = browser_page
    page.goto(dashboard_server + "/schedules/")
    toggle = "#toggle-schedule-crm-sync"
    expect(page.locator(toggle)).to_have_attribute("data-action", "pause")

    _press(page, toggle)
    expect(page.locator(".notice-success")).to_contain_text("Schedule crm-sync paused")
    _focused_on(page, "toggle-schedule-crm-sync")
    expect(page.locator(toggle)).to_have_attribute("data-action", "resume")

    page.keyboard.press("Enter")
    expect(page.locator(".notice-success")).to_contain_text("Schedule crm-sync resumed")
    _focused_on(page, "toggle-schedule-crm-sync")
    expect(page.locator(toggle)).to_have_attribute("data-action", "pause")

    _press(page, "#run-schedule-crm-sync")
    expect(page.locator(".notice-success")).to_contain_text("a run was enqueued now")
    _focused_on(page, "run-schedule-crm-sync")
    assert page.console_errors == []
