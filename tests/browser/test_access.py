"""Sign-in in a real browser against gunicorn with users configured: an operator retries a
job with the button, a viewer sees every page but no button. Every page runs under the
strict Content-Security-Policy, so a blocked script or style would show as a console error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dashboard.store.reads import jobs as read_jobs
from tests.support.factories import make_job
from tests.support.secured import PASSWORDS, SECURED

from .conftest import ARTIFACTS, gunicorn

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def secured_server(app: Any, libpq_url: str, tmp_path: Path) -> Iterator[str]:
    """gunicorn in production mode with the access tests' users and tokens."""
    access = {k: SECURED[k] for k in ("SECRET_KEY", "DASHBOARD_USERS", "API_TOKENS", "AUTH_DISABLED")}
    with gunicorn(libpq_url, tmp_path, **access) as base:
        yield base


def sign_in(page: Any, name: str) -> None:
    page.fill("#username", name)
    page.fill("#password", PASSWORDS[name])
    page.click("form.stacked button[type=submit]")


def test_operator_signs_in_and_retries_a_job(app, secured_server: str, browser_page: Any) -> None:
    from playwright.sync_api import expect

    page = browser_page
    job = make_job("failed")
    page.goto(f"{secured_server}/jobs/{job.id}/")
    assert "/login/?next=" in page.url  # sent to sign in, and brought back afterwards
    expect(page.locator("#auth-off-banner")).to_have_count(0)
    sign_in(page, "olga")
    page.wait_for_url(f"{secured_server}/jobs/{job.id}/")
    expect(page.locator("[data-field=user]")).to_have_text("olga")

    page.click("#job-detail button:has-text('Retry')")
    expect(page.locator("#job-detail .notice-success")).to_contain_text("Job queued again")
    expect(page.locator("[data-event-type=manual_retry] [data-field=actor]")).to_contain_text(
        "by olga (operator) via dashboard"
    )
    assert read_jobs.get_job(job.id).status == "queued"
    page.screenshot(path=str(ARTIFACTS / "signed-in-operator.png"), full_page=True)

    page.click("header.site button:has-text('Sign out')")
    page.wait_for_url(f"{secured_server}/login/")
    page.goto(f"{secured_server}/jobs/")
    assert "/login/" in page.url
    assert page.console_errors == []  # includes any Content-Security-Policy violation


def test_viewer_sees_pages_but_no_retry_button(app, secured_server: str, browser_page: Any) -> None:
    from playwright.sync_api import expect

    page = browser_page
    job = make_job("failed")
    page.goto(f"{secured_server}/login/")
    sign_in(page, "vera")
    page.wait_for_url(f"{secured_server}/")
    page.goto(f"{secured_server}/jobs/{job.id}/")
    expect(page.locator("#job-detail")).to_have_attribute("data-status", "failed")
    expect(page.locator("button:has-text('Retry')")).to_have_count(0)
    expect(page.locator("nav a:has-text('New job')")).to_have_count(0)
    expect(page.locator(".badge.role-viewer")).to_have_text("viewer")
    for path in ("/", "/jobs/", "/events/"):
        page.goto(secured_server + path)
        expect(page.locator("main")).to_be_visible()
    assert page.console_errors == []
    # the server refuses the form page too, whatever the page showed
    response = page.goto(f"{secured_server}/jobs/new/")
    assert response is not None and response.status == 403
    assert read_jobs.get_job(job.id).status == "failed"
