"""Hostile input on the dashboard's doors: the create and retry forms, and every query string.

Whatever arrives, the answer is a clear 4xx (or the form again with an inline error, or a
filter notice), never a 500 or a traceback, user text never comes back as markup, and a
refused request leaves both tables exactly as they were.
"""

from __future__ import annotations

import json
import uuid
from io import BytesIO
from typing import Any
from urllib.parse import urlencode

import pytest
from flask.testing import FlaskClient
from werkzeug.datastructures import FileStorage
from wtforms.validators import ValidationError

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import lists as find_jobs
from dashboard.web.forms import CreateJobForm
from tests.support.factories import make_job
from tests.support.timelines import table_snapshot

HX = {"HX-Request": "true"}
SCRIPT = "<script>alert('xss')</script>"
ATTRIBUTE_BREAK = '"><img src=x onerror=alert(1)>'
MARKUP = (SCRIPT, "<img src=x onerror")


def nested(depth: int) -> str:
    return '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1)


def assert_clean(response: Any, expected: int) -> str:
    """The expected status, no traceback, and no user markup echoed unescaped."""
    html = response.get_data(as_text=True)
    assert response.status_code == expected, html[-1500:]
    assert "Traceback" not in html and "Internal Server Error" not in html
    for markup in MARKUP:
        assert markup not in html
    return html


@pytest.fixture
def existing(app) -> dict[str, Any]:
    """One job of each end state, so 'unchanged' means something; the snapshot before the request."""
    enqueue.create_job(enqueue.JobSpec("demo.success", {"existing": True}, idempotency_key="existing"))
    failed = make_job("failed", last_error="boom")
    return {"failed": failed, "before": table_snapshot()}


# --- the create form ------------------------------------------------------------------------


def form(token: str, **fields: Any) -> dict[str, Any]:
    return {"csrf_token": token, "type": "demo.success", "payload": "{}", "priority": "50",
            "max_attempts": "3", **fields}  # fmt: skip


# (case id, fields that replace the valid form's, the field whose inline error is expected)
REFUSED_FIELDS = [
    ("deep nesting past the parser", {"payload": "[" * 100_000 + "]" * 100_000}, "payload"),
    ("deep nesting unclosed", {"payload": '{"a": [' * 50_000}, "payload"),
    ("nesting past the API's limit", {"payload": nested(101)}, "payload"),
    ("raw NUL in payload string", {"payload": '{"a": "x\x00y"}'}, "payload"),
    ("escaped NUL in payload key", {"payload": '{"a\\u0000": 1}'}, "payload"),
    ("lone surrogate in payload", {"payload": '{"a": "\\ud800"}'}, "payload"),
    ("too many digits in payload", {"payload": '{"n": ' + "9" * 5000 + "}"}, "payload"),
    ("Infinity in payload", {"payload": '{"n": Infinity}'}, "payload"),
    ("payload is a string", {"payload": '"<script>"'}, "payload"),
    ("payload is null", {"payload": "null"}, "payload"),
    ("empty payload", {"payload": ""}, "payload"),
    ("NUL in type", {"type": "demo.success\x00"}, "type"),
    ("type past 120 characters", {"type": "t" * 121}, "type"),
    ("empty type", {"type": ""}, "type"),
    ("NUL in priority", {"priority": "5\x00"}, "priority"),
    ("script as priority", {"priority": SCRIPT}, "priority"),
    ("huge priority", {"priority": str(10**30)}, "priority"),
    ("too many digits in priority", {"priority": "9" * 5000}, "priority"),
    ("float priority", {"priority": "1.5"}, "priority"),
    ("huge max_attempts", {"max_attempts": str(2**31)}, "max_attempts"),
    ("negative max_attempts", {"max_attempts": "-1"}, "max_attempts"),
    ("NUL in max_attempts", {"max_attempts": "\x003"}, "max_attempts"),
    ("infinite delay", {"delay": "1e999"}, "delay"),
    ("huge delay", {"delay": "9" * 400}, "delay"),
    ("delay past ten years", {"delay": str(10 * 366 * 86400)}, "delay"),
    ("NaN delay", {"delay": "NaN"}, "delay"),
    ("script as delay", {"delay": SCRIPT}, "delay"),
    ("date past the end of time", {"available_at": "9999-12-31T23:59:59-14:00"}, "available_at"),
    ("date before the start of time", {"available_at": "0001-01-01T00:00:00+14:00"}, "available_at"),
    ("impossible date", {"available_at": "2026-02-30T00:00"}, "available_at"),
    ("NUL in available_at", {"available_at": "2030-01-01T00:00\x00"}, "available_at"),
    ("script as available_at", {"available_at": SCRIPT}, "available_at"),
    ("huge available_at", {"available_at": "2030" * 10_000}, "available_at"),
    ("NUL in idempotency key", {"idempotency_key": "a\x00b"}, "idempotency_key"),
    ("huge idempotency key", {"idempotency_key": "k" * 100_000}, "idempotency_key"),
]


@pytest.mark.parametrize(
    ("fields", "field"), [c[1:] for c in REFUSED_FIELDS], ids=[c[0] for c in REFUSED_FIELDS]
)
def test_refused_form_fields_get_an_inline_error_and_change_nothing(client, existing, token, fields, field):
    response = client.post("/jobs/new/", data=form(token, **fields))
    html = assert_clean(response, 400)
    assert f'id="{field}-error"' in html
    assert table_snapshot() == existing["before"]


@pytest.mark.parametrize("job_type", ["no.such.type", SCRIPT + ATTRIBUTE_BREAK])
def test_an_unregistered_type_is_accepted_and_reads_back_as_text(client, existing, token, job_type):
    """Any type of 1..120 characters is a job type (as in the reference); it reads back as text."""
    response = client.post("/jobs/new/", data=form(token, type=job_type))
    assert response.status_code == 303
    [created] = [j for j in find_jobs.list_jobs(limit=10, offset=0).results if j.type == job_type]
    html = assert_clean(client.get(f"/jobs/{created.id}/"), 200)
    assert "not registered in the web process" in html


def test_strict_mode_refuses_hostile_types_inline(client, existing, token, strict_job_types):
    for job_type in ("no.such.type", SCRIPT + ATTRIBUTE_BREAK):
        html = assert_clean(client.post("/jobs/new/", data=form(token, type=job_type)), 400)
        assert 'id="type-error"' in html
    assert table_snapshot() == existing["before"]


def test_a_refused_form_shows_every_hostile_value_back_as_text(client, existing, token):
    names = ("payload", "priority", "max_attempts", "delay", "available_at", "idempotency_key")
    hostile = dict.fromkeys(names, SCRIPT + ATTRIBUTE_BREAK)
    for headers in ({}, HX):
        response = client.post("/jobs/new/", data=form(token, **hostile), headers=headers)
        html = assert_clean(response, 200 if headers else 400)
        assert "&lt;script&gt;alert(" in html  # kept, as text
    assert table_snapshot() == existing["before"]


def test_fields_the_form_does_not_have_are_ignored(app, client, token):
    extra = {
        "status": "failed",
        "attempts": "99",
        "locked_by": SCRIPT,
        "result": "{}",
        "id": str(uuid.uuid4()),
    }
    response = client.post("/jobs/new/", data=form(token, **extra))
    assert response.status_code == 303
    [created] = find_jobs.list_jobs(limit=10, offset=0).results
    assert (created.status, created.attempts, created.locked_by, created.result) == ("queued", 0, None, None)
    assert str(created.id) != extra["id"]


def test_naive_available_at_is_read_in_the_dashboards_time_zone(app, client, token):
    """The browser's datetime-local input sends no offset: that is the form's normal input."""
    response = client.post("/jobs/new/", data=form(token, available_at="2030-06-01T12:30:15"))
    assert response.status_code == 303
    [created] = find_jobs.list_jobs(limit=10, offset=0).results
    assert created.available_at.isoformat() == "2030-06-01T12:30:15+00:00"  # TIME_ZONE is UTC in tests


def raw_post(client: FlaskClient, path: str, body: bytes, content_type: str, **headers: str) -> Any:
    return client.post(path, data=body, content_type=content_type, headers=headers)


def urlencoded(token: str, **fields: str) -> bytes:
    return urlencode(form(token, **fields)).encode()


@pytest.mark.parametrize(
    ("make_body", "content_type", "expected"),
    [
        (lambda t: urlencoded(t, payload="x" * 2_000_000), "application/x-www-form-urlencoded", 413),
        (
            lambda t: urlencoded(t) + b"&payload=%7B%22a%22%3A%22%FF%FE%22%7D",
            "application/x-www-form-urlencoded",
            400,
        ),
        (
            lambda t: urlencoded(t, payload="") + b"%7B%22a%22%3A%22\xff\xfe%22%7D",
            "application/x-www-form-urlencoded",
            400,
        ),
        (lambda t: urlencoded(t) + b"&idempotency_key=%C0%AF", "application/x-www-form-urlencoded", 400),
        (lambda t: urlencoded(t) + b"&type=demo.succ%ED%A0%80ess", "application/x-www-form-urlencoded", 400),
        (lambda t: urlencoded(t), "text/plain", 415),
        (lambda t: urlencoded(t), "application/xml", 415),
    ],
    ids=[
        "over MAX_CONTENT_LENGTH",
        "invalid UTF-8 percent-encoded",
        "invalid UTF-8 raw bytes",
        "overlong UTF-8",
        "encoded surrogate",
        "text/plain",
        "XML",
    ],
)
def test_hostile_form_bodies_are_refused(client, existing, token, make_body, content_type, expected):
    for headers in ({}, {**HX, "X-CSRFToken": token}):
        response = raw_post(client, "/jobs/new/", make_body(token), content_type, **headers)
        assert_clean(response, expected)
    assert table_snapshot() == existing["before"]


def test_a_json_body_on_the_form_is_refused(client, existing, token):
    headers = {"X-CSRFToken": token}
    for body in ['{"type": "demo.success", "payload": {"a": 1}}', "[1, 2]", '"x"', "{", "null"]:
        response = raw_post(client, "/jobs/new/", body.encode(), "application/json", **headers)
        assert 400 <= response.status_code < 500, body
        assert_clean(response, response.status_code)
    assert table_snapshot() == existing["before"]


def test_a_file_upload_as_payload_is_refused(client, existing, token):
    data = {**form(token), "payload": (BytesIO(b'{"a": 1}'), "payload.json")}
    response = client.post("/jobs/new/", data=data, content_type="multipart/form-data")
    assert "application/x-www-form-urlencoded" in assert_clean(response, 415)
    assert table_snapshot() == existing["before"]


def test_a_payload_that_is_not_text_is_refused_by_the_form_itself(app):
    """Behind the door's content-type check, the form still refuses a file or a JSON value."""
    for value in [FileStorage(BytesIO(b"{}"), "payload.json"), {"a": 1}, ["{}"]]:
        with app.test_request_context("/jobs/new/", method="POST"):
            form_ = CreateJobForm(formdata=None, meta={"csrf": False})
            form_.payload.data = value
            with pytest.raises(ValidationError, match="as text"):
                form_.validate_payload(form_.payload)


def test_a_valid_form_with_hostile_but_storable_text_creates_the_job_and_shows_it_as_text(client, token):
    payload = json.dumps({SCRIPT: ATTRIBUTE_BREAK, "n": 10**30})
    response = client.post("/jobs/new/", data=form(token, payload=payload, idempotency_key=SCRIPT))
    assert response.status_code == 303
    [created] = find_jobs.list_jobs(limit=10, offset=0).results
    assert created.payload == {SCRIPT: ATTRIBUTE_BREAK, "n": 10**30} and created.idempotency_key == SCRIPT
    assert_clean(client.get(response.headers["Location"]), 200)


# --- the retry form -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/jobs/%3Cscript%3E/retry/",
        "/jobs/%00/retry/",
        "/jobs/%FF%FE/retry/",
        "/jobs/" + "a" * 10_000 + "/retry/",
        "/jobs/6f1c2b9e-0d4a-4c57-9a3e-2f8b7c1d5e60/retry/",  # a well-formed id of no job
        "/jobs/1%20OR%201=1/retry/",
    ],
)
def test_retry_of_a_bad_id_is_404(client, existing, token, path):
    for headers in ({}, HX):
        assert_clean(client.post(path, data={"csrf_token": token}, headers=headers), 404)
    assert table_snapshot() == existing["before"]


@pytest.mark.parametrize(
    "next_",
    [
        "javascript:alert(1)",
        "//evil.example/",
        "/\x00/",
        "/" + SCRIPT,
        "/\\evil",
        "/" + "a" * 50_000,
        "https:/x",
    ],
)
def test_retry_goes_back_only_to_a_local_path(client, app, token, next_):
    running = make_job("running")
    before = table_snapshot()
    response = client.post(f"/jobs/{running.id}/retry/", data={"csrf_token": token, "next": next_})
    assert response.status_code == 303
    location = response.headers["Location"]
    assert location.startswith("/") and not location.startswith("//")
    assert "<" not in location and "\x00" not in location and "\\" not in location
    assert table_snapshot() == before  # a running job is not retried


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b"csrf_token=TOKEN&next=%2F%FF", "application/x-www-form-urlencoded", 400),
        (b"csrf_token=TOKEN&next=/" + b"a" * 2_000_000, "application/x-www-form-urlencoded", 413),
    ],
    ids=["invalid UTF-8", "over MAX_CONTENT_LENGTH"],
)
def test_hostile_retry_bodies_are_refused(client, existing, token, body, content_type, expected):
    job = existing["failed"]
    data = body.replace(b"TOKEN", token.encode())
    assert_clean(raw_post(client, f"/jobs/{job.id}/retry/", data, content_type), expected)
    assert table_snapshot() == existing["before"]


# --- query strings --------------------------------------------------------------------------

# (url, status, whether the page must name a refused filter next to the filter form)
QUERIES = [
    ("/jobs/?status=" + SCRIPT, 200, True),
    ("/jobs/?type=" + SCRIPT, 200, False),  # free text: "no jobs match", the filter shown escaped
    ("/jobs/?type=%00", 200, True),
    ("/jobs/?type=" + "x" * 100_000, 200, True),
    ("/jobs/?limit=" + str(10**30), 200, True),
    ("/jobs/?offset=" + "9" * 5000, 200, True),
    ("/jobs/?limit=1e3&offset=-0", 200, True),
    ("/jobs/?status=queued&status=" + SCRIPT, 200, False),  # the first value counts
    ("/jobs/?" + "&".join(f"p{i}=x" for i in range(5000)), 200, False),
    ("/jobs/?type=%FF%FE", 400, False),
    ("/jobs/?status=%C0%AF", 400, False),
    ("/jobs/?type=%ED%A0%80", 400, False),
    ("/events/?type=" + SCRIPT, 200, True),
    ("/events/?job_id=" + SCRIPT, 200, True),
    ("/events/?job_id=%00", 200, True),
    ("/events/?job_id=" + ATTRIBUTE_BREAK, 200, True),
    ("/events/?before=" + "9" * 5000, 200, True),
    ("/events/?before=0", 200, True),
    ("/events/?after=-1", 200, True),
    ("/events/?after=" + str(2**63), 200, True),
    ("/events/?before=1&after=1", 200, True),
    ("/events/?limit=" + str(10**30), 200, True),
    ("/events/?job_id=%FF", 400, False),
    ("/events/newer/?after=" + str(10**30), 200, False),
    ("/events/newer/?after=" + SCRIPT + "&type=" + SCRIPT, 200, False),
    ("/events/newer/?job_id=" + ATTRIBUTE_BREAK, 200, False),
    ("/events/newer/?after=%FF", 400, False),
    ("/jobs/%3Cscript%3Ealert(1)%3C/script%3E/", 404, False),
    ("/jobs/%00/", 404, False),
    ("/jobs/%FF%FE/", 404, False),
    ("/jobs/" + "a" * 10_000 + "/", 404, False),
    ("/jobs/00000000-0000-0000-0000-000000000000/", 404, False),
    ("/jobs/1%20OR%201=1/", 404, False),
    ("/?x=" + SCRIPT, 200, False),
    ("/?x=%FF", 400, False),
    ("/jobs/new/?type=" + SCRIPT, 200, False),
]


@pytest.mark.parametrize(("url", "expected", "names_filter"), QUERIES, ids=[q[0][:60] for q in QUERIES])
def test_hostile_query_strings_are_answered_cleanly(client, existing, url, expected, names_filter):
    """A page that names a refused filter is a 400 for a browser and a 200 for htmx (which
    swaps only 2xx answers)."""
    for headers in ({}, HX):
        status = 400 if names_filter and not headers and expected == 200 else expected
        html = assert_clean(client.get(url, headers=headers), status)
        assert ('data-param="' in html) is names_filter
    assert table_snapshot() == existing["before"]
