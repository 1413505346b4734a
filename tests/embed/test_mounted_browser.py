"""The dashboard mounted at /ops/jobs in a host app, in Chromium: its pages (the New job form
among them) load their static files and htmx under the prefix without an error response, and
a live job's page polls its fragment there, at 1440x900 and 390x844, light and dark."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from werkzeug.serving import make_server

from dashboard import jobs
from tests.browser.conftest import CHROMIUM_ARGS, chromium_path
from tests.embed.host import PREFIX, make_host

pytestmark = pytest.mark.browser

SIZES = [(1440, 900), (390, 844)]


@pytest.fixture
def live_host(app: Flask, database_url: str) -> Iterator[tuple[str, Flask]]:
    host_app, db, _ = make_host(database_url)
    server = make_server("127.0.0.1", 0, host_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", host_app
    server.shutdown()
    thread.join(10)
    with host_app.app_context():
        db.engine.dispose()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(("width", "height"), SIZES)
def test_the_mounted_pages_load_whole_under_the_prefix(
    live_host: tuple[str, Flask], scheme: str, width: int, height: int
) -> None:
    chromium = chromium_path()
    if chromium is None:
        pytest.skip("Chromium is not installed (/usr/bin/chromium)")
    base, host_app = live_host
    with host_app.app_context():
        job = jobs.enqueue("demo.success", {"shown": True})
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        context = browser.new_context(
            viewport={"width": width, "height": height},
            color_scheme=scheme,  # type: ignore[arg-type]
            extra_http_headers={"X-Host-Role": "operator"},
        )
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        try:
            for path in ("/", "/jobs/", f"/jobs/{job.id}/", "/events/", "/workers/", "/jobs/new/"):
                page.goto(base + PREFIX + path)
                assert page.evaluate("typeof window.htmx") == "object", path  # the vendored htmx loaded
                assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), path
            if (width, scheme) == (1440, "light"):
                with page.expect_response(a_poll):
                    page.goto(base + PREFIX + f"/jobs/{job.id}/")  # a live job's page polls its fragment
        finally:
            context.close()
            browser.close()
    assert errors == []


def a_poll(response: Any) -> bool:
    """An htmx request under the prefix."""
    return PREFIX in response.request.url and response.request.headers.get("hx-request") == "true"
