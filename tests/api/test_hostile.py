"""Hostile input: whatever a client sends, never a 500, and a refused request changes nothing."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from dashboard.store.lifecycle import create as enqueue

from .helpers import TEST_TYPE, table_snapshot


def nested(depth: int) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for _ in range(depth - 1):
        doc = {"a": doc}
    return doc


def text_body(payload: str = "{}", **fields: str) -> dict[str, Any]:
    """A JSON body written by hand, for what ``json.dumps`` will not produce."""
    extra = "".join(f', "{name}": {value}' for name, value in fields.items())
    return raw(f'{{"type": "{TEST_TYPE}", "payload": {payload}{extra}}}')


def body(**fields: Any) -> dict[str, Any]:
    return {"json": {"type": TEST_TYPE, **fields}}


def raw(text: str | bytes, content_type: str = "application/json") -> dict[str, Any]:
    return {"data": text, "content_type": content_type}


SQL = "'; DROP TABLE jobs_job; --"

# (case id, method, path, request kwargs, expected status)
HOSTILE = [
    ("huge body", "post", "/api/jobs/", body(payload={"x": "y" * 2_000_000}), 413),
    ("huge type", "post", "/api/jobs/", {"json": {"type": "t" * 500_000}}, 400),
    ("huge idempotency key", "post", "/api/jobs/", body(idempotency_key="k" * 100_000), 400),
    ("nested past the limit", "post", "/api/jobs/", body(payload=nested(101)), 400),
    (
        "nested past the parser",
        "post",
        "/api/jobs/",
        text_body('{"a": ' * 100_000 + "1" + "}" * 100_000),
        400,
    ),
    ("huge top-level array", "post", "/api/jobs/", raw(json.dumps(list(range(100_000)))), 400),
    ("NUL in type", "post", "/api/jobs/", {"json": {"type": "test\x00api"}}, 400),
    ("bidi override in type", "post", "/api/jobs/", {"json": {"type": "invoice\u202egpj.exe"}}, 400),
    ("newline in type", "post", "/api/jobs/", {"json": {"type": "mail.send\nINFO forged"}}, 400),
    ("terminal escape in type", "post", "/api/jobs/", {"json": {"type": "\x1b[31mred"}}, 400),
    ("zero-width space in type", "post", "/api/jobs/", {"json": {"type": "mail\u200b.send"}}, 400),
    ("line separator in type", "post", "/api/jobs/", {"json": {"type": "a\u2028b"}}, 400),
    (
        "bidi override in a bulk job's type",
        "post",
        "/api/jobs/bulk/",
        {"json": {"jobs": [{"type": "ok"}, {"type": "\u2066isolate\u2069"}]}},
        400,
    ),
    ("NUL in idempotency key", "post", "/api/jobs/", body(idempotency_key="a\x00b"), 400),
    ("NUL in payload value", "post", "/api/jobs/", body(payload={"a": ["ok", {"b": "x\x00"}]}), 400),
    ("NUL in payload key", "post", "/api/jobs/", body(payload={"a\x00": 1}), 400),
    ("raw NUL byte in JSON", "post", "/api/jobs/", raw(b'{"type": "a\x00b"}'), 400),
    (
        "lone surrogate in payload",
        "post",
        "/api/jobs/",
        text_body('{"a": "\\ud800"}'),
        400,
    ),
    (
        "lone surrogate in key",
        "post",
        "/api/jobs/",
        text_body(idempotency_key='"\\udfff"'),
        400,
    ),
    ("lone surrogate as a payload key", "post", "/api/jobs/", text_body('{"\\ud800": 1}'), 400),
    (
        "lone surrogate as a payload key in bulk create",
        "post",
        "/api/jobs/bulk/",
        raw('{"jobs": [{"type": "test.api"}, {"type": "test.api", "payload": {"ok": {"\\udc00x": 1}}}]}'),
        400,
    ),
    (
        "invalid UTF-8 body",
        "post",
        "/api/jobs/",
        raw(b'{"type": "test.api", "payload": {"a": "\xc3\x28"}}'),
        400,
    ),
    (
        "latin-1 charset claim",
        "post",
        "/api/jobs/",
        raw(b'{"type": "caf\xe9"}', "application/json; charset=latin-1"),
        400,
    ),
    ("SQL in an over-long type", "post", "/api/jobs/", {"json": {"type": SQL * 5}}, 400),
    ("SQL in priority", "post", "/api/jobs/", body(priority=SQL), 400),
    ("huge priority", "post", "/api/jobs/", body(priority=10**100), 400),
    ("huge max_attempts", "post", "/api/jobs/", body(max_attempts=10**40), 400),
    (
        "too many digits",
        "post",
        "/api/jobs/",
        text_body('{"n": ' + "9" * 5000 + "}"),
        400,
    ),
    ("NaN", "post", "/api/jobs/", text_body('{"n": NaN}'), 400),
    (
        "infinite float",
        "post",
        "/api/jobs/",
        text_body('{"n": -1e999}'),
        400,
    ),
    ("naive datetime", "post", "/api/jobs/", body(available_at="2030-01-01T00:00:00"), 400),
    ("impossible date", "post", "/api/jobs/", body(available_at="2026-13-45T00:00:00+00:00"), 400),
    ("date at the edge of time", "post", "/api/jobs/", body(available_at="9999-12-31T23:59:59-14:00"), 400),
    ("datetime as object", "post", "/api/jobs/", body(available_at={"$gt": ""}), 400),
    ("form body", "post", "/api/jobs/", raw("type=test.api", "application/x-www-form-urlencoded"), 415),
    ("XML body", "post", "/api/jobs/", raw("<job/>", "application/xml"), 415),
    ("SQL in status filter", "get", "/api/jobs/?status=queued'%20OR%20'1'='1", {}, 400),
    ("SQL in type filter", "get", "/api/jobs/?type=%27%20OR%201%3D1%20--", {}, 200),
    ("invalid UTF-8 in query", "get", "/api/jobs/?type=%ff%fe", {}, 200),
    ("NUL in type filter", "get", "/api/jobs/?type=%00", {}, 400),
    ("huge limit", "get", f"/api/jobs/?limit={10**30}", {}, 200),
    ("huge offset", "get", f"/api/jobs/?offset={10**30}", {}, 400),
    ("too many digits in offset", "get", "/api/jobs/?offset=" + "9" * 5000, {}, 400),
    ("huge type filter", "get", "/api/jobs/?type=" + "x" * 5000, {}, 400),
    ("NaN in payload search", "get", "/api/jobs/?q=a%3DNaN", {}, 400),
    ("Infinity in payload search", "get", "/api/jobs/?q=a.b%3D-Infinity", {}, 400),
    ("out-of-range number in payload search", "get", "/api/jobs/?q=a%3D1e999", {}, 400),
    ("NaN in a JSON payload search", "get", "/api/jobs/?q=%7B%22a%22%3A%20%5BNaN%5D%7D", {}, 400),
    ("lone surrogate in payload search", "get", "/api/jobs/?q=a%3D%22%5Cud800%22", {}, 400),
    ("lone surrogate key in payload search", "get", "/api/jobs/?q=%7B%22%5Cudfff%22%3A1%7D", {}, 400),
    (
        "NaN in bulk dry run search",
        "post",
        "/api/jobs/bulk-retry/",
        {"json": {"q": "a=NaN", "dry_run": True}},
        400,
    ),
    (
        "lone surrogate in bulk run search",
        "post",
        "/api/jobs/bulk-cancel/",
        {"json": {"q": 'a="\\ud800"', "dry_run": False}},
        400,
    ),
    ("SQL in job_id filter", "get", "/api/job-events/?job_id=1%20OR%201=1", {}, 400),
    ("SQL in event type", "get", f"/api/job-events/?type={SQL}", {}, 400),
    ("NUL in cursor", "get", "/api/job-events/?cursor=%00", {}, 400),
    ("huge cursor", "get", "/api/job-events/?cursor=" + "Yj" * 5000, {}, 400),
    ("SQL in path id", "get", "/api/jobs/1;DROP%20TABLE%20jobs_job/", {}, 404),
    ("invalid UTF-8 in path id", "get", "/api/jobs/%ff%fe/", {}, 404),
    ("NUL in path id", "post", "/api/jobs/%00/retry/", {}, 404),
    ("very long path", "get", "/api/jobs/" + "a" * 10_000 + "/", {}, 404),
]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "expected"),
    [case[1:] for case in HOSTILE],
    ids=[case[0] for case in HOSTILE],
)
def test_hostile_requests_are_refused_cleanly(client, job_type, method, path, kwargs, expected):
    enqueue.create_job(enqueue.JobSpec(TEST_TYPE, payload={"existing": True}, idempotency_key="existing"))
    before = table_snapshot()
    response = getattr(client, method)(path, **kwargs)
    assert response.status_code == expected, response.get_data(as_text=True)[:500]
    assert response.mimetype == "application/json"
    answer = response.get_json()
    if expected >= 400:
        assert isinstance(answer["detail"], str) and "Traceback" not in answer["detail"]
    assert table_snapshot() == before


def test_an_unstorable_payload_key_names_the_field_and_the_key(client, job_type):
    """The key is quoted back escaped: an answer in UTF-8 cannot carry an unpaired surrogate
    (rendering it was the 500)."""
    created = client.post("/api/jobs/", **text_body('{"\\ud800": 1}'))
    assert created.get_json()["errors"] == {
        "payload": ["Key '\\ud800': Must be valid Unicode (unpaired surrogate)."]
    }
    bulk = client.post(
        "/api/jobs/bulk/", **raw('{"jobs": [{"type": "a"}, {"type": "a", "payload": {"\\udfff": 1}}]}')
    )
    assert bulk.status_code == 400 and list(bulk.get_json()["errors"]) == ["jobs.1.payload"]


def test_a_type_with_a_control_or_format_character_names_it(client, job_type):
    answer = client.post("/api/jobs/bulk/", json={"jobs": [{"type": "ok"}, {"type": "report\u202e.build"}]})
    (message,) = answer.get_json()["errors"]["jobs.1.type"]
    assert "U+202E RIGHT-TO-LEFT OVERRIDE at position 6" in message
    pattern = client.get("/api/schema/").get_json()["components"]["schemas"]["CreateJob"]["properties"][
        "type"
    ]
    assert re.fullmatch(pattern["pattern"], "report.build") and not re.fullmatch(
        pattern["pattern"], "a\u202eb"
    )
    assert client.post("/api/jobs/", json={"type": "rapport.café ☃"}).status_code == 201  # any letters


def test_a_payload_search_for_an_unstorable_value_says_why(client, job_type):
    answer = client.get("/api/jobs/", query_string={"q": "a=NaN"}).get_json()
    assert "finite numbers" in answer["errors"]["q"][0]
    answer = client.get("/api/jobs/", query_string={"q": 'a="\\ud800"'}).get_json()
    assert "unpaired surrogate" in answer["errors"]["q"][0]
    assert client.get("/api/jobs/", query_string={"q": "a=NaNa"}).status_code == 200  # a word: a string


NASTY_BUT_VALID = {
    "sql": SQL,
    "quotes": "\"'`\\",
    "unicode": "😀 \u202e ﷽ e\u0301",
    "big": 10**100,
    "tiny": -1e-308,
    "float": 0.1,
    "empty": {"": [None, True, False, [], {}]},
    "nested": nested(90),
    "like": "%_\\",
}


def test_sql_in_a_type_is_just_a_type(client, job_type):
    """Any type of 1..120 characters is accepted (JOB_TYPES_STRICT is off): stored as data."""
    created = client.post("/api/jobs/", json={"type": SQL})
    assert created.status_code == 201
    assert client.get(f"/api/jobs/{created.get_json()['id']}/").get_json()["type"] == SQL
    assert client.get("/api/jobs/").get_json()["count"] == 1


def test_nasty_but_valid_values_round_trip_exactly(client, job_type):
    created = client.post(
        "/api/jobs/", json={"type": job_type, "payload": NASTY_BUT_VALID, "idempotency_key": SQL}
    )
    assert created.status_code == 201
    job = created.get_json()
    assert job["payload"] == NASTY_BUT_VALID
    assert job["idempotency_key"] == SQL
    assert client.get(f"/api/jobs/{job['id']}/").get_json()["payload"] == NASTY_BUT_VALID
    again = client.post("/api/jobs/", json={"type": job_type, "idempotency_key": SQL})
    assert again.status_code == 200 and again.get_json()["id"] == job["id"]
    assert client.get("/api/jobs/?type=%25_").get_json()["count"] == 0
