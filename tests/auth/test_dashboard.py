"""The dashboard with sign-in on: each role against each page and action, sign-in and
sign-out, the session cookie's flags."""

from __future__ import annotations

import re
import time

import pytest

from dashboard.auth.session import directory_of
from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.records import JobRecord
from tests.support.factories import make_job
from tests.support.secured import PASSWORDS, build, fast_hash, form_token, sign_in

READ_PAGES = ["/", "/jobs/", "/jobs/?status=failed", "/events/", "/jobs/{id}/"]
HX = {"HX-Request": "true"}


def failed_job() -> JobRecord:
    """A job failed for good through the service, so the overview lists it among failures."""
    job = enqueue.create_job(enqueue.JobSpec("demo.fail", max_attempts=1)).job
    assert lifecycle.claim_next_job("host:1:thread-1:abcd", lease_seconds=30).id == job.id
    lifecycle.fail_job(
        job.id, "host:1:thread-1:abcd", 1, "boom", backoff_base_seconds=1, backoff_max_seconds=1
    )
    failed = read_jobs.get_job(job.id)
    assert failed.status == "failed"
    return failed


def create_form(token: str) -> dict[str, str]:
    fields = {"type": "demo.success", "payload": "{}", "priority": "50", "max_attempts": "3"}
    return {"csrf_token": token, **fields}


def pages(job_id) -> list[str]:
    return [page.format(id=job_id) for page in READ_PAGES]


# --- who sees what --------------------------------------------------------------------------


def test_anonymous_is_sent_to_sign_in_from_every_page_and_action(app, anonymous):
    job = make_job("failed")
    for path in [*pages(job.id), "/jobs/new/"]:
        response = anonymous.get(path)
        assert response.status_code == 303, path
        assert response.headers["Location"].startswith("/login/?next=")
    response = anonymous.post(f"/jobs/{job.id}/retry/", data={"csrf_token": form_token(anonymous)})
    assert response.status_code == 303 and response.headers["Location"].startswith("/login/")
    assert read_jobs.get_job(job.id).status == "failed"


def test_an_htmx_poll_without_a_session_navigates_to_sign_in(app, anonymous):
    job = make_job("running")
    response = anonymous.get(
        f"/jobs/{job.id}/", headers={**HX, "HX-Current-URL": f"http://localhost/jobs/{job.id}/"}
    )
    assert response.status_code == 401
    assert response.headers["HX-Redirect"] == f"/login/?next=/jobs/{job.id}/"
    assert response.get_data() == b""


def test_viewer_reads_every_page_without_the_operator_controls(app, viewer):
    job = failed_job()
    for path in pages(job.id):
        response = viewer.get(path)
        assert response.status_code == 200, path
        html = response.get_data(as_text=True)
        assert "vera" in html and "role-viewer" in html
        assert "/retry/" not in html, f"a retry control on {path}"
        assert 'href="/jobs/new/"' not in html


def test_viewer_is_refused_create_and_retry_on_the_server(app, viewer):
    job = make_job("failed")
    token = form_token(viewer, "/jobs/")
    assert viewer.get("/jobs/new/").status_code == 403
    created = viewer.post("/jobs/new/", data=create_form(token))
    assert created.status_code == 403
    assert "viewer role" in created.get_data(as_text=True)
    retried = viewer.post(f"/jobs/{job.id}/retry/", data={"csrf_token": token}, headers=HX)
    assert retried.status_code == 403
    assert read_jobs.get_job(job.id).status == "failed"
    assert find_jobs.list_jobs(limit=10, offset=0).count == 1


def test_operator_sees_and_uses_the_controls(app, operator):
    job = failed_job()
    overview = operator.get("/").get_data(as_text=True)
    detail = operator.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert f"/jobs/{job.id}/retry/" in overview and f"/jobs/{job.id}/retry/" in detail
    assert 'href="/jobs/new/"' in detail
    token = form_token(operator, "/jobs/new/")
    response = operator.post(f"/jobs/{job.id}/retry/", data={"csrf_token": token})
    assert response.status_code == 303
    assert read_jobs.get_job(job.id).status == "queued"
    created = operator.post("/jobs/new/", data=create_form(token))
    assert created.status_code == 303


# --- sign-in and sign-out -------------------------------------------------------------------


def test_sign_in_returns_to_the_page_asked_for(app, anonymous):
    response = sign_in(anonymous, "vera", next="/jobs/?status=failed")
    assert response.status_code == 303
    assert response.headers["Location"] == "/jobs/?status=failed"
    assert anonymous.get("/jobs/").status_code == 200


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/", "/\\evil.example", "/\r\nSet-Cookie: x=1", "/\x7f"]
)
def test_sign_in_never_redirects_off_site(app, anonymous, target):
    response = sign_in(anonymous, "vera", next=target)
    assert response.headers["Location"] == "/"


@pytest.mark.parametrize(
    ("name", "password"), [("vera", "wrong-password"), ("nobody", "vera-viewer-pw"), ("vera", "")]
)
def test_a_failed_sign_in_says_so_inline_and_signs_nobody_in(app, anonymous, name, password):
    response = anonymous.post(
        "/login/", data={"csrf_token": form_token(anonymous), "username": name, "password": password}
    )
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    if password:  # the same words for an unknown name and a wrong password
        assert "Unknown user name or wrong password." in html
    else:
        assert 'id="password-error"><p>This field is required.' in html
    assert anonymous.get("/jobs/").status_code == 303


def test_sign_in_without_a_csrf_token_is_refused(app, anonymous):
    response = anonymous.post("/login/", data={"username": "vera", "password": PASSWORDS["vera"]})
    assert response.status_code == 400
    assert anonymous.get("/jobs/").status_code == 303


def test_sign_out_needs_a_post_with_the_token_and_ends_the_session(app, operator):
    assert operator.get("/logout/").status_code == 405
    assert operator.post("/logout/").status_code == 400  # no CSRF token
    assert operator.get("/jobs/").status_code == 200
    response = operator.post("/logout/", data={"csrf_token": form_token(operator, "/jobs/")})
    assert response.status_code == 303 and response.headers["Location"] == "/login/"
    assert operator.get("/jobs/").status_code == 303


def test_session_cookie_is_httponly_lax_and_secure_only_over_https(app, secured_app):
    plain = secured_app.test_client()
    cookie = sign_in(plain, "vera").headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Expires=" in cookie
    assert "Secure" not in cookie
    tls = secured_app.test_client()
    tls_token = form_token_over(tls, "https://localhost/login/")
    response = tls.post(
        "https://localhost/login/",
        data={"csrf_token": tls_token, "username": "vera", "password": PASSWORDS["vera"]},
        headers={"Referer": "https://localhost/login/"},
    )
    assert response.status_code == 303
    assert "Secure" in response.headers["Set-Cookie"]


def form_token_over(client, url: str) -> str:
    html = client.get(url).get_data(as_text=True)
    return re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html).group(1)


def test_changing_a_password_in_the_configuration_ends_old_sessions(app, database_url, viewer):
    assert viewer.get("/jobs/").status_code == 200
    with build(database_url, DASHBOARD_USERS=f"vera:viewer:{fast_hash('a-new-password')}") as changed:
        moved = changed.test_client()
        moved._cookies = viewer._cookies  # the same browser, after the operator changed the setting
        assert moved.get("/jobs/").status_code == 303
    with build(database_url, DASHBOARD_USERS="", API_TOKENS=f"ci:viewer:{'x' * 40}") as removed:
        gone = removed.test_client()
        gone._cookies = viewer._cookies
        assert gone.get("/jobs/").status_code == 303


def test_a_new_secret_key_ends_every_session_on_a_running_app(app, secured_app, viewer):
    """The session signer is built once per key: a key changed under a running app (a
    rotation) is used at once, and a cookie signed with the old one signs nobody in."""
    assert viewer.get("/jobs/").status_code == 200
    old = secured_app.secret_key
    secured_app.secret_key = old + "-rotated"
    try:
        assert viewer.get("/jobs/").status_code == 303
    finally:
        secured_app.secret_key = old
    assert viewer.get("/jobs/").status_code == 200  # the old key back: the cookie is valid again


def test_demoting_a_user_in_the_configuration_takes_effect_at_once(app, database_url, operator):
    job = make_job("failed")
    # the same password hash (a new one would sign her out), with the viewer role
    olga_hash = directory_of(operator.application).users["olga"].password_hash
    with build(database_url, DASHBOARD_USERS=f"olga:viewer:{olga_hash}") as changed:
        demoted = changed.test_client()
        demoted._cookies = operator._cookies
        html = demoted.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "role-viewer" in html and "/retry/" not in html


# --- the banner when sign-in is off ----------------------------------------------------------


def test_development_mode_shows_that_sign_in_is_off(app, client):
    html = client.get("/").get_data(as_text=True)
    assert 'id="auth-off-banner"' in html and "AUTH_DISABLED=true" in html  # the test app's setting


def test_development_default_banner(app, database_url):
    with build(database_url, DEBUG="true", DASHBOARD_USERS="", API_TOKENS="") as dev:
        html = dev.test_client().get("/").get_data(as_text=True)
    assert "Development mode: sign-in is off" in html


def test_no_banner_once_signed_in(app, viewer):
    assert 'id="auth-off-banner"' not in viewer.get("/").get_data(as_text=True)


def test_sign_in_page_redirects_away_when_sign_in_is_off(app, client):
    response = client.get("/login/?next=/jobs/")
    assert response.status_code == 303 and response.headers["Location"] == "/jobs/"


def test_a_next_with_control_characters_is_ignored_not_a_500(app, operator):
    assert operator.get("/login/?next=/%0D%0Ax").headers["Location"] == "/"
    job = make_job("failed")
    token = form_token(operator, "/jobs/")
    response = operator.post(f"/jobs/{job.id}/retry/", data={"csrf_token": token, "next": "/\r\n"})
    assert response.status_code == 303 and response.headers["Location"] == f"/jobs/{job.id}/"


@pytest.mark.parametrize("current", ["http://[::1", "//[", "not a url", ""])
def test_an_odd_hx_current_url_falls_back_to_the_overview(app, anonymous, current):
    response = anonymous.get("/jobs/", headers={**HX, "HX-Current-URL": current})
    assert response.status_code == 401
    assert response.headers["HX-Redirect"] == "/login/?next=/"


def test_a_session_ends_a_lifetime_after_sign_in_however_often_it_was_used(app, viewer):
    assert viewer.get("/jobs/").status_code == 200
    lifetime = viewer.application.permanent_session_lifetime.total_seconds()
    with viewer.session_transaction() as session:
        session["signed_in_at"] = int(time.time() - lifetime - 5)
    assert viewer.get("/jobs/").status_code == 303
    with viewer.session_transaction() as session:
        session["signed_in_at"] = "yesterday"  # not a time: no session either
    assert viewer.get("/jobs/").status_code == 303


def test_sign_in_page_says_when_no_user_is_configured(app, database_url):
    with build(database_url, DASHBOARD_USERS="") as tokens_only:
        html = tokens_only.test_client().get("/login/").get_data(as_text=True)
    assert "No dashboard users are configured" in html


def test_the_timeline_credits_only_the_events_an_actor_wrote(app, operator):
    job = enqueue.create_job(
        enqueue.JobSpec("demo.success"), event_data={"actor": "olga", "source": "dashboard"}
    ).job
    claimed = lifecycle.claim_next_job("host:1:thread-1:abcd", lease_seconds=30)
    lifecycle.record_progress(job.id, "host:1:thread-1:abcd", claimed.attempts, data={"actor": "mallory"})
    html = operator.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "by <strong>olga</strong>" in html
    assert "mallory</strong>" not in html


def test_a_signed_in_post_over_the_size_limit_answers_413_with_the_page(operator, secured_app):
    """The error page's sign-out form must not read the (too large) body again."""
    body = b"csrf_token=x&payload=" + b"a" * (secured_app.config["MAX_CONTENT_LENGTH"] + 10)
    for path in ("/jobs/new/", "/logout/", "/login/"):
        response = operator.post(path, data=body, content_type="application/x-www-form-urlencoded")
        assert response.status_code == 413, path
        page = response.get_data(as_text=True)
        assert 'action="/logout/"' in page and 'name="csrf_token"' in page
