"""Retry and create: CSRF on every form, flash and redirect for browsers, swaps for htmx."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.values import utcnow
from tests.support.factories import make_job
from tests.support.forms import HX, csrf_token

# --- retry ----------------------------------------------------------------------------------


def test_retry_without_a_csrf_token_is_refused(app, client):
    job = make_job("failed")
    response = client.post(f"/jobs/{job.id}/retry/")
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "security token" in html and "<html" in html
    assert read_jobs.get_job(job.id).status == "failed"


def test_retry_with_a_wrong_token_is_refused(app, client):
    job = make_job("failed")
    csrf_token(client)  # a session exists, but the token sent is not its token
    response = client.post(f"/jobs/{job.id}/retry/", data={"csrf_token": "forged"})
    assert response.status_code == 400
    assert read_jobs.get_job(job.id).status == "failed"


def test_plain_retry_requeues_flashes_and_redirects_to_the_job(app, client, token):
    job = make_job("failed")
    response = client.post(f"/jobs/{job.id}/retry/", data={"csrf_token": token})
    assert response.status_code == 303
    assert response.headers["Location"] == f"/jobs/{job.id}/"
    retried = read_jobs.get_job(job.id)
    assert retried.status == "queued" and retried.attempts == 0
    manual = [e for e in read_jobs.job_events(job.id) if e.type == "manual_retry"]
    assert len(manual) == 1 and manual[0].data.get("source") == "dashboard"
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Job queued again" in html


def test_retry_goes_back_to_a_local_next_only(app, client, token):
    job = make_job("failed")
    back = client.post(f"/jobs/{job.id}/retry/", data={"csrf_token": token, "next": "/?x=1"})
    assert back.headers["Location"] == "/?x=1"
    other = make_job("failed")
    for evil in ["https://evil.example/", "//evil.example/", "/\\evil.example"]:
        response = client.post(f"/jobs/{other.id}/retry/", data={"csrf_token": token, "next": evil})
        assert response.headers["Location"] == f"/jobs/{other.id}/", evil


def test_retry_of_a_job_that_is_no_longer_failed_says_so(app, client, token):
    job = make_job("running")
    response = client.post(f"/jobs/{job.id}/retry/", data={"csrf_token": token}, follow_redirects=True)
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "Nothing changed: the job is running now, not failed." in html
    assert read_jobs.get_job(job.id).status == "running"


def test_htmx_retry_from_the_detail_page_swaps_the_detail(app, client, token):
    job = make_job("failed")
    headers = {**HX, "HX-Target": "job-detail", "X-CSRFToken": token}
    response = client.post(f"/jobs/{job.id}/retry/", headers=headers)
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert html.lstrip().startswith('<article id="job-detail"') and "<html" not in html
    assert "Job queued again" in html
    assert 'data-status="queued"' in html and 'hx-trigger="every 2s' in html  # live again: polls


def test_htmx_retry_from_the_overview_swaps_the_row(app, client, token):
    job = make_job("failed")
    headers = {**HX, "HX-Target": f"failure-{job.id}", "X-CSRFToken": token}
    html = client.post(f"/jobs/{job.id}/retry/", headers=headers).get_data(as_text=True)
    assert "<html" not in html and "retry-result" in html and "Job queued again" in html
    again = client.post(f"/jobs/{job.id}/retry/", headers=headers).get_data(as_text=True)
    assert "Nothing changed: the job is queued now, not failed." in again


def test_htmx_retry_needs_the_header_token_too(app, client):
    job = make_job("failed")
    response = client.post(f"/jobs/{job.id}/retry/", headers={**HX, "HX-Target": "job-detail"})
    assert response.status_code == 400
    assert "<html" not in response.get_data(as_text=True)
    assert read_jobs.get_job(job.id).status == "failed"


def test_retry_of_unknown_or_malformed_ids_is_404(app, client, token):
    assert client.post(f"/jobs/{uuid.uuid4()}/retry/", data={"csrf_token": token}).status_code == 404
    assert client.post("/jobs/xyz/retry/", data={"csrf_token": token}).status_code == 404


# --- create ---------------------------------------------------------------------------------


def _form(token: str, **fields: str) -> dict[str, str]:
    return {
        "csrf_token": token,
        "type": "demo.success",
        "payload": "{}",
        "priority": "50",
        "max_attempts": "3",
        **fields,
    }


def test_create_form_suggests_registered_types_and_the_default_max_attempts(app, client):
    html = client.get("/jobs/new/").get_data(as_text=True)
    assert re.search(
        r'<input[^>]*list="job-types"[^>]*name="type"|<input[^>]*name="type"[^>]*list="job-types"', html
    )
    assert re.search(r'<datalist id="job-types">.*<option value="demo.success">', html)
    assert re.search(r'name="max_attempts"[^>]*value="3"', html)
    fragment = client.get("/jobs/new/", headers=HX).get_data(as_text=True)
    assert fragment.lstrip().startswith('<form id="job-form"') and "<html" not in fragment


def test_create_form_accepts_a_type_no_handler_is_registered_for(app, client, token):
    response = client.post("/jobs/new/", data=_form(token, type="billing.not.deployed.yet"))
    assert response.status_code == 303
    [job] = find_jobs.list_jobs(limit=10, offset=0).results
    assert (job.type, job.status) == ("billing.not.deployed.yet", "queued")
    page = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "not registered in the web process" in page


def test_create_form_refuses_a_type_with_a_bidi_override_or_a_control_character(app, client, token):
    for job_type in ("invoice\u202egpj.exe", "mail\tsend"):
        response = client.post("/jobs/new/", data=_form(token, type=job_type))
        assert response.status_code == 400
        html = response.get_data(as_text=True)
        assert 'id="type-error"' in html and "invisible formatting characters" in html
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0


def test_create_form_in_strict_mode_refuses_an_unregistered_type(app, client, token, strict_job_types):
    response = client.post("/jobs/new/", data=_form(token, type="billing.not.deployed.yet"))
    assert response.status_code == 400
    html = response.get_data(as_text=True)
    assert 'id="type-error"' in html and "JOB_TYPES_STRICT" in html
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0
    assert client.post("/jobs/new/", data=_form(token)).status_code == 303


def test_create_without_csrf_is_refused(app, client):
    data = _form("")
    del data["csrf_token"]
    response = client.post("/jobs/new/", data=data)
    assert response.status_code == 400
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0


def test_create_makes_a_queued_job_and_redirects_to_it(app, client, token):
    payload = '{"sleep_seconds": 2, "note": "<script>x</script>"}'
    data = _form(token, payload=payload, priority="70", max_attempts="5", idempotency_key=" key-1 ")
    response = client.post("/jobs/new/", data=data)
    assert response.status_code == 303
    [job] = find_jobs.list_jobs(limit=10, offset=0).results
    assert response.headers["Location"] == f"/jobs/{job.id}/"
    assert (job.type, job.status, job.priority, job.max_attempts) == ("demo.success", "queued", 70, 5)
    assert job.payload == {"sleep_seconds": 2, "note": "<script>x</script>"}
    assert job.idempotency_key == "key-1"
    [created] = read_jobs.job_events(job.id)
    assert created.data["source"] == "dashboard"
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Job created." in html and "<script>x</script>" not in html
    # the same key again returns the same job
    again = client.post("/jobs/new/", data=data)
    assert again.headers["Location"] == f"/jobs/{job.id}/"
    assert find_jobs.list_jobs(limit=10, offset=0).count == 1
    assert "already exists" in client.get(again.headers["Location"]).get_data(as_text=True)


def test_create_with_a_delay_or_an_available_time(app, client, token):
    before = utcnow()
    client.post("/jobs/new/", data=_form(token, delay="120"))
    [delayed] = find_jobs.list_jobs(limit=10, offset=0).results
    assert before + timedelta(seconds=119) < delayed.available_at < utcnow() + timedelta(seconds=121)
    client.post("/jobs/new/", data=_form(token, available_at="2030-01-02T03:04"))
    at = find_jobs.list_jobs(limit=1, offset=0).results[0].available_at
    assert at.isoformat() == "2030-01-02T03:04:00+00:00"  # TIME_ZONE is UTC in tests
    client.post("/jobs/new/", data=_form(token, available_at="2030-01-02T03:04:00+02:00"))
    at = find_jobs.list_jobs(limit=1, offset=0).results[0].available_at
    assert at.isoformat() == "2030-01-02T01:04:00+00:00"


def test_create_shows_inline_errors_and_keeps_the_input(app, client, token):
    cases = [
        ({"payload": '{"a": 1,'}, "payload", "Not valid JSON"),
        ({"payload": "[1, 2]"}, "payload", "must be a JSON object"),
        ({"payload": '{"a": NaN}'}, "payload", "Not valid JSON"),
        ({"payload": '{"a": 1e999}'}, "payload", "Not valid JSON"),
        ({"payload": '{"a": "\\u0000"}'}, "payload", "NUL"),
        ({"type": "t" * 121}, "type", "120"),
        ({"type": ""}, "type", "Enter a job type"),
        ({"priority": "abc"}, "priority", "Not a valid integer"),
        ({"priority": "40000"}, "priority", "between"),
        ({"max_attempts": "0"}, "max_attempts", "between"),
        ({"delay": "-1"}, "delay", "between"),
        ({"delay": "nan"}, "delay", ""),
        ({"delay": "5", "available_at": "2030-01-01T00:00"}, "available_at", "not both"),
        ({"available_at": "tomorrow"}, "available_at", "Use a date and time"),
        ({"idempotency_key": "k" * 256}, "idempotency_key", "255"),
    ]
    for fields, name, message in cases:
        response = client.post("/jobs/new/", data=_form(token, **fields))
        html = response.get_data(as_text=True)
        assert response.status_code == 400, fields
        error = re.search(rf'<div class="error" id="{name}-error"><p>([^<]*)</p>', html)
        assert error and message in error.group(1), (fields, html[-2000:])
        # the field points at its error, says it is invalid, and (the first invalid) has focus
        field = re.search(rf'<(?:input|textarea|select)[^>]*\bid="{name}"[^>]*>', html)
        assert field and 'aria-invalid="true"' in field.group(0), field
        assert re.search(rf'aria-describedby="{name}-error( {name}-hint)?"', field.group(0)), field.group(0)
        assert "autofocus" in field.group(0) and html.count("autofocus") == 1
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0
    kept = client.post("/jobs/new/", data=_form(token, payload='{"keep": "<me>"')).get_data(as_text=True)
    assert "{&#34;keep&#34;: &#34;&lt;me&gt;&#34;" in kept


def test_htmx_create_swaps_errors_in_place_and_redirects_on_success(app, client, token):
    headers = {**HX, "X-CSRFToken": token}
    bad = client.post("/jobs/new/", data=_form(token, payload="{"), headers=headers)
    assert bad.status_code == 200  # htmx swaps only 2xx answers
    html = bad.get_data(as_text=True)
    assert html.lstrip().startswith('<form id="job-form"') and "Not valid JSON" in html
    good = client.post("/jobs/new/", data=_form(token), headers=headers)
    [job] = find_jobs.list_jobs(limit=10, offset=0).results
    assert good.headers["HX-Redirect"] == f"/jobs/{job.id}/"
