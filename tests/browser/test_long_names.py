"""A job type of the longest length with no place to break, while the no-worker banner names it:
every page still fits a phone's width (no sideways scroll) and a desktop's, light and dark, and
axe finds nothing."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.config.rules import QUEUE_NAME_MAX_LENGTH, TYPE_MAX_LENGTH
from dashboard.store.lifecycle import create as enqueue

from .test_pages import VIEWPORTS, _check, every_view

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG_TYPE = "reports." + "x" * (
    TYPE_MAX_LENGTH - len("reports.")
)  # no space, no dot to break at past its start
LONG_QUEUE = "q" * QUEUE_NAME_MAX_LENGTH


def test_a_long_type_in_the_alarm_banner_does_not_widen_any_page(
    app: Any, dashboard_server: str, chromium: str
) -> None:
    from playwright.sync_api import expect

    assert len(LONG_TYPE) == TYPE_MAX_LENGTH
    job = enqueue.create_job(
        enqueue.JobSpec(LONG_TYPE, {"n": 1}, queue=LONG_QUEUE)
    ).job  # ready, and no worker runs
    pages = {
        "overview": "/",
        "jobs": "/jobs/",
        "job": f"/jobs/{job.id}/",
        "queues": "/queues/",
    }
    problems: list[str] = []
    for size, scheme, page in every_view(chromium, timeout_ms=20000):
        for name, path in pages.items():
            response = page.goto(dashboard_server + path)
            assert response is not None and response.status == 200, (name, response)
            banner = page.locator("[data-alarm]")
            expect(banner).to_be_visible()
            expect(banner).to_contain_text(LONG_TYPE)
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > VIEWPORTS[size]["width"]:
                problems.append(f"{name}-{size}-{scheme}: scrollWidth {width} > {VIEWPORTS[size]['width']}")
            _check(page, f"long-type-{name}-{size}-{scheme}", problems)
    assert problems == [], "\n".join(problems)
