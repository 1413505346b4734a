"""POST /api/jobs/bulk/: many jobs in one request, all or nothing, idempotency keys per job."""

from __future__ import annotations

import json
import uuid
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from dashboard.api.inputs import BULK_MAX_JOBS
from dashboard.api.outputs import BulkResult, BulkResults, Job, bulk_results_json, job_renderer
from dashboard.store import values
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.reads import stats as read_stats
from dashboard.store.records import CreateResult
from tests.support.open_access import ANONYMOUS_API, audit

from .helpers import JOB_FIELDS, RECORD_SHAPES, TEST_TYPE, create, shaped_record, table_snapshot

URL = "/api/jobs/bulk/"


def bulk(client, *jobs: dict[str, Any]):
    return client.post(URL, json={"jobs": list(jobs)})


def test_bulk_create_returns_201_and_the_jobs_in_request_order(client, job_type):
    response = bulk(
        client,
        {"type": job_type, "payload": {"i": 0}},
        {"type": job_type, "payload": {"i": 1}, "priority": 90, "max_attempts": 5},
        {"type": job_type, "available_at": "2030-01-02T03:04:05+03:30", "idempotency_key": "b-1"},
    )
    assert response.status_code == 201
    assert response.mimetype == "application/json"
    results = response.get_json()["results"]
    assert [r["created"] for r in results] == [True, True, True]
    jobs = [r["job"] for r in results]
    assert all(list(job) == JOB_FIELDS for job in jobs)
    assert [job["payload"] for job in jobs] == [{"i": 0}, {"i": 1}, {}]
    assert (jobs[1]["priority"], jobs[1]["max_attempts"]) == (90, 5)
    assert (jobs[0]["priority"], jobs[0]["max_attempts"]) == (50, 3)  # the defaults of POST /api/jobs/
    assert jobs[2]["available_at"] == "2030-01-01T23:34:05+00:00"
    assert jobs[2]["idempotency_key"] == "b-1"
    for job in jobs:
        assert client.get(f"/api/jobs/{job['id']}/").get_json() == job
        events = client.get(f"/api/jobs/{job['id']}/events/").get_json()
        assert [(e["type"], audit(e["data"])) for e in events] == [
            ("created", {**ANONYMOUS_API, "type": job_type})
        ]


def test_idempotency_keys_are_honoured_per_job(client, job_type):
    old = create(client, job_type, idempotency_key="taken")
    response = bulk(
        client,
        {"type": job_type, "idempotency_key": "taken"},
        {"type": job_type, "idempotency_key": "new"},
        {"type": job_type, "idempotency_key": "new", "priority": 99},  # same key twice in one request
        {"type": job_type},
    )
    assert response.status_code == 201
    results = response.get_json()["results"]
    assert [r["created"] for r in results] == [False, True, False, True]
    assert results[0]["job"] == old
    assert results[2]["job"] == results[1]["job"] and results[2]["job"]["priority"] == 50
    assert find_jobs.list_jobs(limit=10, offset=0).count == 3


def test_replaying_a_request_creates_nothing_and_answers_200(client, job_type):
    jobs = [{"type": job_type, "idempotency_key": f"k-{i}"} for i in range(3)]
    first = client.post(URL, json={"jobs": jobs})
    assert first.status_code == 201
    before = table_snapshot()
    again = client.post(URL, json={"jobs": jobs})
    assert again.status_code == 200
    assert [r["created"] for r in again.get_json()["results"]] == [False] * 3
    assert [r["job"] for r in again.get_json()["results"]] == [r["job"] for r in first.get_json()["results"]]
    assert table_snapshot() == before


def test_the_most_jobs_a_request_may_carry(client, job_type):
    response = client.post(
        URL, json={"jobs": [{"type": job_type, "payload": {"i": i}} for i in range(BULK_MAX_JOBS)]}
    )
    assert response.status_code == 201
    results = response.get_json()["results"]
    assert [r["job"]["payload"]["i"] for r in results] == list(range(BULK_MAX_JOBS))
    assert read_stats.stats(values.utcnow()).by_status["queued"] == BULK_MAX_JOBS


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({"jobs": []}, {"jobs": "at least 1 item"}),
        ({"jobs": [{"type": TEST_TYPE}] * (BULK_MAX_JOBS + 1)}, {"jobs": "at most 1000 items"}),
        ({}, {"jobs": "Field required"}),
        ({"jobs": None}, {"jobs": "valid list"}),
        ({"jobs": {"type": TEST_TYPE}}, {"jobs": "valid list"}),
        ({"jobs": [{"type": TEST_TYPE}], "dry_run": True}, {"dry_run": "Unknown field"}),
        ({"jobs": [{"type": TEST_TYPE}, "job"]}, {"jobs.1": "valid dictionary"}),
        (
            {"jobs": [*[{"type": TEST_TYPE}] * 3, {"type": TEST_TYPE, "priority": 40000}]},
            {"jobs.3.priority": "less than or equal to 32767"},
        ),
        (
            {"jobs": [{"type": ""}, {"type": TEST_TYPE, "available_at": "2030-01-01T00:00:00"}]},
            {"jobs.0.type": "at least 1 character", "jobs.1.available_at": "time zone offset"},
        ),
        (
            {"jobs": [{"type": TEST_TYPE, "payload": {"a": "x\x00"}}, {"type": TEST_TYPE, "status": "x"}]},
            {"jobs.0.payload": "NUL", "jobs.1.status": "Unknown field"},
        ),
    ],
    ids=[
        "empty",
        "over the limit",
        "no jobs field",
        "null jobs",
        "object for jobs",
        "unknown top-level field",
        "a job that is not an object",
        "one bad priority",
        "several bad jobs",
        "NUL and unknown field",
    ],
)
def test_one_invalid_job_refuses_the_whole_request_naming_it(client, job_type, body, errors):
    create(client, job_type, idempotency_key="existing")
    before = table_snapshot()
    response = client.post(URL, json=body)
    assert response.status_code == 400
    answer = response.get_json()
    assert answer["detail"] == "Invalid input."
    assert set(answer["errors"]) == set(errors), answer
    for field, message in errors.items():
        assert any(message in text for text in answer["errors"][field]), answer
    assert table_snapshot() == before


def nested(depth: int) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for _ in range(depth - 1):
        doc = {"a": doc}
    return doc


HOSTILE = [
    ("huge body", {"json": {"jobs": [{"type": TEST_TYPE, "payload": {"x": "y" * 2_000_000}}]}}, 413),
    (
        "many small jobs past the body limit",
        {"json": {"jobs": [{"type": TEST_TYPE * 150}] * BULK_MAX_JOBS}},
        413,
    ),
    (
        "huge jobs array",
        {"data": json.dumps({"jobs": [0] * 200_000}), "content_type": "application/json"},
        400,
    ),
    ("nested past the limit", {"json": {"jobs": [{"type": TEST_TYPE, "payload": nested(101)}]}}, 400),
    (
        "nested past the parser",
        {"data": '{"jobs": [' + "[" * 100_000 + "]" * 100_000 + "]}", "content_type": "application/json"},
        400,
    ),
    ("invalid UTF-8", {"data": b'{"jobs": [{"type": "\xc3\x28"}]}', "content_type": "application/json"}, 400),
    ("lone surrogate", {"data": '{"jobs": [{"type": "\\ud800"}]}', "content_type": "application/json"}, 400),
    (
        "NaN priority",
        {"data": '{"jobs": [{"type": "x", "priority": NaN}]}', "content_type": "application/json"},
        400,
    ),
    ("huge priority", {"json": {"jobs": [{"type": TEST_TYPE, "priority": 10**100}]}}, 400),
    ("huge max_attempts as float", {"json": {"jobs": [{"type": TEST_TYPE, "max_attempts": 1e300}]}}, 400),
    ("naive datetime", {"json": {"jobs": [{"type": TEST_TYPE, "available_at": "2030-01-01T00:00"}]}}, 400),
    ("SQL in an over-long type", {"json": {"jobs": [{"type": "'; DROP TABLE jobs_job; --" * 5}]}}, 400),
    ("top-level array", {"json": [{"type": TEST_TYPE}]}, 400),
    ("form body", {"data": "jobs=1", "content_type": "application/x-www-form-urlencoded"}, 415),
    ("no content type", {"data": '{"jobs": []}'}, 415),
]


@pytest.mark.parametrize(
    ("kwargs", "expected"), [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE]
)
def test_hostile_bulk_requests_are_refused_cleanly(client, job_type, kwargs, expected):
    create(client, job_type, idempotency_key="existing")
    before = table_snapshot()
    response = client.post(URL, **kwargs)
    assert response.status_code == expected, response.get_data(as_text=True)[:500]
    assert response.mimetype == "application/json"
    detail = response.get_json()["detail"]
    assert isinstance(detail, str) and "Traceback" not in detail
    assert table_snapshot() == before


def test_html_in_strings_is_stored_and_returned_as_data(client, job_type):
    script = "<script>alert(1)</script>"
    response = bulk(client, {"type": job_type, "payload": {"note": script}, "idempotency_key": script})
    assert response.status_code == 201
    job = response.get_json()["results"][0]["job"]
    assert (job["payload"], job["idempotency_key"]) == ({"note": script}, script)
    assert read_jobs.get_job(uuid.UUID(job["id"])).payload == {"note": script}


@pytest.mark.parametrize("method", ["get", "put", "delete", "patch"])
def test_other_methods_get_405_json(client, method):
    response = getattr(client, method)(URL)
    assert response.status_code == 405
    assert set(response.headers["Allow"].split(", ")) == {"OPTIONS", "POST"}
    assert response.get_json() == {"detail": f'Method "{method.upper()}" not allowed.'}


def test_offsets_that_postgresql_would_not_parse_keep_their_instant(client, job_type):
    """RFC 3339 allows offsets up to 23:59; PostgreSQL's text input stops at 15:59."""
    response = bulk(client, {"type": job_type, "available_at": "2030-06-26T12:14:56.51+23:40"})
    assert response.status_code == 201
    assert response.get_json()["results"][0]["job"]["available_at"] == "2030-06-25T12:34:56.510000+00:00"


def test_unregistered_types_are_accepted_in_bulk(client, job_type):
    response = client.post(URL, json={"jobs": [{"type": job_type}, {"type": "not.deployed.yet"}]})
    assert response.status_code == 201, response.get_json()
    types = [r["job"]["type"] for r in response.get_json()["results"]]
    assert types == [job_type, "not.deployed.yet"]


def test_strict_mode_refuses_an_unregistered_type_in_bulk_by_index(client, job_type, strict_job_types):
    before = table_snapshot()
    response = client.post(URL, json={"jobs": [{"type": job_type}, {"type": "not.deployed.yet"}]})
    assert response.status_code == 400
    errors = response.get_json()["errors"]
    assert set(errors) == {"jobs.1.type"} and "Unknown job type" in errors["jobs.1.type"][0]
    assert table_snapshot() == before


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/New_York"])
def test_the_fast_bulk_answer_is_the_models_answer_byte_for_byte(zone):
    """``bulk_results_json`` skips the ``Job`` models; what it renders is what they render."""
    created = [True, True, False, False, False, True]
    results = [CreateResult(shaped_record(f), c) for f, c in zip(RECORD_SHAPES, created, strict=True)]
    tz = ZoneInfo(zone)
    models = BulkResults(
        results=[BulkResult(created=r.created, job=Job.model_validate(r.job)) for r in results]
    )
    expected = models.model_dump_json(context={"tz": tz}, exclude_unset=True).encode()
    assert bulk_results_json(results, tz) == expected
    # Rendered ahead (while the server inserts), as each job would be if created; a job that
    # was not created is rendered from the job holding its key, whatever was rendered ahead.
    render = job_renderer(tz)
    ahead = [render(r.job) if r.created else b'"not this"' for r in results]
    assert bulk_results_json(results, tz, ahead) == expected
