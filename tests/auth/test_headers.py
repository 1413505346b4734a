"""Security headers everywhere, no inline script in any page, and cross-site posts refused."""

from __future__ import annotations

import re

import pytest

from dashboard.auth.headers import POLICY, render_policy, script_hash
from dashboard.store.reads import jobs as read_jobs
from tests.support.factories import make_job
from tests.support.secured import build, form_token

STRICT = render_policy(POLICY)


def assert_secure_headers(response, where: str) -> None:
    headers = response.headers
    assert headers["Content-Security-Policy"] == STRICT, where
    assert headers["X-Content-Type-Options"] == "nosniff", where
    assert headers["X-Frame-Options"] == "DENY", where
    assert headers["Referrer-Policy"] == "same-origin", where


def test_the_policy_forbids_inline_script_and_framing():
    assert "script-src 'self';" in STRICT and "unsafe" not in STRICT
    assert "frame-ancestors 'none'" in STRICT and "object-src 'none'" in STRICT


def test_every_kind_of_response_carries_the_headers(app, viewer, anonymous):
    job = make_job("failed")
    for path in ["/", "/jobs/", f"/jobs/{job.id}/", "/events/", "/nowhere/", "/static/app.js"]:
        with viewer.get(path) as response:
            assert_secure_headers(response, path)
    assert_secure_headers(viewer.get("/jobs/", headers={"HX-Request": "true"}), "fragment")
    assert_secure_headers(viewer.get("/jobs/new/"), "403 page")
    for path in ["/login/", "/api/health/", "/api/jobs/", "/api/docs/", "/api/schema/"]:
        assert_secure_headers(anonymous.get(path), path)


def test_no_page_carries_inline_script_or_style(app, operator, anonymous):
    job = make_job("failed")
    pages = ["/", "/jobs/", f"/jobs/{job.id}/", "/events/", "/jobs/new/"]
    bodies = {path: operator.get(path).get_data(as_text=True) for path in pages}
    bodies["/login/"] = anonymous.get("/login/").get_data(as_text=True)
    bodies["/api/docs/"] = anonymous.get("/api/docs/").get_data(as_text=True)
    for path, html in bodies.items():
        assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == [], path
        assert re.findall(r"\son[a-z]+\s*=", html) == [], path
        assert re.findall(r"<style|\sstyle\s*=", html) == [], path
        assert "javascript:" not in html, path


def test_hsts_only_over_https(app, secured_app):
    client = secured_app.test_client()
    assert "Strict-Transport-Security" not in client.get("/api/health/").headers
    tls = client.get("https://localhost/api/health/")
    assert tls.headers["Strict-Transport-Security"].startswith("max-age=")


def test_a_cross_site_post_is_refused_even_with_a_valid_token(app, operator):
    job = make_job("failed")
    token = form_token(operator, "/jobs/")
    for site in ("cross-site", "same-site"):
        response = operator.post(
            f"/jobs/{job.id}/retry/", data={"csrf_token": token}, headers={"Sec-Fetch-Site": site}
        )
        assert response.status_code == 403
        assert "another site" in response.get_data(as_text=True)
    assert read_jobs.get_job(job.id).status == "failed"
    same = operator.post(
        f"/jobs/{job.id}/retry/", data={"csrf_token": token}, headers={"Sec-Fetch-Site": "same-origin"}
    )
    assert same.status_code == 303 and read_jobs.get_job(job.id).status == "queued"


def test_a_cross_site_sign_in_is_refused(app, anonymous):
    token = form_token(anonymous)
    response = anonymous.post(
        "/login/",
        data={"csrf_token": token, "username": "olga", "password": "olga-operator-pw"},
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    assert response.status_code == 403
    assert anonymous.get("/jobs/").status_code == 303


@pytest.mark.parametrize("path", ["/", "/jobs/"])
def test_with_the_debug_toolbar_the_policy_admits_only_its_bootstrap_line(app, database_url, path):
    no_credentials = {"DASHBOARD_USERS": "", "API_TOKENS": ""}  # the toolbar never loads with one
    with build(
        database_url,
        TESTING=False,
        DEBUG="true",
        ENABLE_DEBUG_TOOLBAR="true",
        AUTH_DISABLED="true",
        **no_credentials,
    ) as dev:
        response = dev.test_client().get(path)
    csp = response.headers["Content-Security-Policy"]
    assert re.search(r"script-src 'self' 'sha256-[A-Za-z0-9+/]+=*';", csp)
    html = response.get_data(as_text=True)
    inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", html, re.S)
    assert len(inline) == 1 and "DEBUG_TOOLBAR_STATIC_PATH" in inline[0]  # the toolbar's line, only
    assert script_hash(inline[0]) in csp  # exactly that line is allowed


def test_signed_in_pages_and_api_answers_are_never_stored(operator, anonymous):
    from tests.support.secured import OPERATOR_TOKEN, bearer

    job = make_job("failed")
    for path in ("/", "/jobs/", f"/jobs/{job.id}/", "/events/", "/jobs/new/"):
        assert operator.get(path).headers["Cache-Control"] == "no-store", path
    for path in ("/api/jobs/", f"/api/jobs/{job.id}/", "/api/jobs/stats/", "/api/config/"):
        assert anonymous.get(path, headers=bearer(OPERATOR_TOKEN)).headers["Cache-Control"] == "no-store", (
            path
        )
    assert anonymous.get("/api/jobs/").headers["Cache-Control"] == "no-store"  # a 401 too
    with anonymous.get("/static/app.css") as static:
        assert static.status_code == 200 and "no-store" not in static.headers.get("Cache-Control", "")
