"""POST /api/jobs/: 201 for a new job, 200 for a known idempotency key, defaults, every rule."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from dashboard.api.outputs import Job, job_json
from dashboard.config import settings_of
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from tests.support.open_access import ANONYMOUS_API, audit

from .helpers import JOB_FIELDS, RECORD_SHAPES, another_app, create, shaped_record, table_snapshot


def test_create_returns_201_with_the_reference_job_shape(client, job_type):
    before = datetime.now(UTC)
    response = client.post(
        "/api/jobs/",
        json={
            "type": job_type,
            "payload": {"sleep_seconds": 1},
            "priority": 70,
            "available_at": None,
            "max_attempts": 5,
            "idempotency_key": "k-1",
        },
    )
    assert response.status_code == 201
    assert response.mimetype == "application/json"
    job = response.get_json()
    assert list(job) == JOB_FIELDS
    assert job["type"] == job_type
    assert job["payload"] == {"sleep_seconds": 1}
    assert (job["status"], job["priority"], job["attempts"], job["max_attempts"]) == ("queued", 70, 0, 5)
    assert job["idempotency_key"] == "k-1"
    assert job["locked_by"] is job["locked_until"] is job["result"] is job["finished_at"] is None
    assert job["last_error"] == ""
    available_at = datetime.fromisoformat(job["available_at"])
    assert before <= available_at <= datetime.now(UTC)  # null means now
    assert response.headers["Location"].endswith(f"/api/jobs/{job['id']}/")
    assert response.headers["Location"].startswith("http://")


def test_create_defaults_when_fields_are_omitted(client, job_type, app):
    job = create(client, job_type)
    assert job["payload"] == {}
    assert job["priority"] == 50
    assert job["max_attempts"] == settings_of(app).worker.max_attempts_default


def test_null_means_default_for_optional_fields(client, job_type):
    job = create(client, job_type, payload=None, priority=None, max_attempts=None, idempotency_key=None)
    assert (job["payload"], job["priority"], job["max_attempts"], job["idempotency_key"]) == ({}, 50, 3, None)


def test_max_attempts_default_follows_the_worker_setting(database_url, job_type):
    with another_app(DATABASE_URL=database_url, JOB_WORKER_MAX_ATTEMPTS_DEFAULT="7") as other:
        response = other.test_client().post("/api/jobs/", json={"type": job_type})
    assert response.status_code == 201
    assert response.get_json()["max_attempts"] == 7


def test_create_writes_a_created_event_that_names_the_api(client, job_type):
    job = create(client, job_type)
    events = client.get(f"/api/jobs/{job['id']}/events/").get_json()
    assert [(e["type"], audit(e["data"])) for e in events] == [
        ("created", {"type": job_type, **ANONYMOUS_API})
    ]


def test_available_at_in_the_future_is_kept_with_its_instant(client, job_type):
    job = create(client, job_type, available_at="2030-01-02T03:04:05+03:30")
    assert datetime.fromisoformat(job["available_at"]) == datetime(2030, 1, 1, 23, 34, 5, tzinfo=UTC)


def test_known_idempotency_key_returns_the_existing_job_with_200(client, job_type):
    first = create(client, job_type, idempotency_key="same", payload={"n": 1})
    again = client.post("/api/jobs/", json={"type": job_type, "idempotency_key": "same", "payload": {"n": 2}})
    assert again.status_code == 200
    assert again.get_json() == first
    assert find_jobs.list_jobs(limit=10, offset=0).count == 1


def test_json_with_charset_parameter_is_accepted(client, job_type):
    response = client.post(
        "/api/jobs/", data=f'{{"type": "{job_type}"}}', content_type="application/json; charset=utf-8"
    )
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({}, "type", "Field required"),
        ({"type": ""}, "type", "at least 1 character"),
        ({"type": "x" * 121}, "type", "at most 120 characters"),
        ({"type": 5}, "type", "valid string"),
        ({"priority": "50"}, "priority", "valid integer"),
        ({"priority": True}, "priority", "valid integer"),
        ({"priority": 1.5}, "priority", "valid integer"),
        ({"priority": 32768}, "priority", "less than or equal to 32767"),
        ({"priority": -32769}, "priority", "greater than or equal to -32768"),
        ({"max_attempts": 0}, "max_attempts", "greater than or equal to 1"),
        ({"max_attempts": -3}, "max_attempts", "greater than or equal to 1"),
        ({"max_attempts": 2**31}, "max_attempts", "less than or equal to 2147483647"),
        ({"available_at": "2030-01-01T00:00:00"}, "available_at", "time zone offset"),
        ({"available_at": "tomorrow"}, "available_at", "ISO 8601"),
        ({"available_at": 1700000000}, "available_at", "ISO 8601"),
        ({"available_at": "0001-01-01T00:00:00+05:00"}, "available_at", "between"),
        ({"available_at": "2026-02-30T00:00:00Z"}, "available_at", "valid date"),
        ({"available_at": "2026-06-21 00:00:00Z"}, "available_at", "RFC 3339"),
        ({"payload": [1, 2]}, "payload", "valid dictionary"),
        ({"payload": "text"}, "payload", "valid dictionary"),
        ({"idempotency_key": ""}, "idempotency_key", "at least 1 character"),
        ({"idempotency_key": "k" * 256}, "idempotency_key", "at most 255 characters"),
        ({"status": "succeeded"}, "status", "Unknown field"),
    ],
)
def test_invalid_create_bodies_get_400_naming_the_field(client, job_type, body, field, message):
    body = {"type": job_type, **body} if "type" not in body and body else body
    before = table_snapshot()
    response = client.post("/api/jobs/", json=body)
    assert response.status_code == 400
    error = response.get_json()
    assert error["detail"] == "Invalid input."
    assert field in error["errors"], error
    assert any(message in text for text in error["errors"][field]), error
    assert table_snapshot() == before


@pytest.mark.parametrize("unregistered", ["no.such.type", "x" * 120, "<b>é</b> spaces ok"])
def test_any_type_of_up_to_120_characters_is_accepted(client, job_type, unregistered):
    """The reference's rule: ``type`` is a routing key; the workers that handle it may come later."""
    response = client.post("/api/jobs/", json={"type": unregistered})
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert body["type"] == unregistered and body["status"] == "queued"
    assert read_jobs.get_job(uuid.UUID(body["id"])).type == unregistered


def test_strict_mode_refuses_unregistered_types_listing_the_registered_ones(
    client, job_type, strict_job_types
):
    before = table_snapshot()
    response = client.post("/api/jobs/", json={"type": "nope"})
    assert response.status_code == 400
    [message] = response.get_json()["errors"]["type"]
    assert "Unknown job type" in message and job_type in message
    assert table_snapshot() == before
    assert client.post("/api/jobs/", json={"type": job_type}).status_code == 201


def test_every_invalid_field_is_reported_at_once(client, job_type):
    error = client.post("/api/jobs/", json={"type": job_type, "priority": "x", "max_attempts": 0}).get_json()
    assert set(error["errors"]) == {"priority", "max_attempts"}


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        ("{", "application/json"),
        ("", "application/json"),
        ('{"type": "a",}', "application/json"),
        ('{"type": NaN}', "application/json"),
        ('{"payload": {"x": Infinity}}', "application/json"),
        ('{"payload": {"x": 1e999}}', "application/json"),
        (b'{"type": "\xff\xfe"}', "application/json"),
        ("1" * 5000, "application/json"),
    ],
)
def test_malformed_json_gets_400(client, job_type, data, content_type):
    response = client.post("/api/jobs/", data=data, content_type=content_type)
    assert response.status_code == 400
    error = response.get_json()
    assert error["detail"] == "Malformed JSON body."
    assert error["errors"]["body"][0].startswith("Malformed JSON")


@pytest.mark.parametrize("body", ["[]", '"text"', "null", "42"])
def test_a_body_that_is_not_an_object_gets_400(client, body):
    response = client.post("/api/jobs/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert "body" in response.get_json()["errors"]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]
)
def test_wrong_content_type_gets_415(client, job_type, content_type):
    kwargs = {"data": f'{{"type": "{job_type}"}}'}
    if content_type:
        kwargs["content_type"] = content_type
    response = client.post("/api/jobs/", **kwargs)
    assert response.status_code == 415
    assert "application/json" in response.get_json()["detail"]
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0


def test_body_over_the_size_limit_gets_413(client, app, job_type):
    limit = app.config["MAX_CONTENT_LENGTH"]
    response = client.post("/api/jobs/", json={"type": job_type, "payload": {"blob": "x" * limit}})
    assert response.status_code == 413
    assert response.get_json() == {"detail": f"Request body too large (limit {limit} bytes)."}
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0


def test_service_and_api_agree_on_the_created_job(client, job_type):
    job = create(client, job_type, priority=-5)
    record = read_jobs.get_job(uuid.UUID(job["id"]))
    assert record is not None and record.priority == -5
    assert datetime.fromisoformat(job["created_at"]) == record.created_at
    assert record.available_at == record.created_at  # omitted available_at: the creation instant


def test_integral_numbers_count_as_integers(client, job_type):
    """JSON Schema's `integer` admits 7.0, and so does the API (1.5 stays a 400)."""
    job = create(client, job_type, priority=7.0, max_attempts=2e0)
    assert (job["priority"], job["max_attempts"]) == (7, 2)


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/New_York"])
@pytest.mark.parametrize("fields", RECORD_SHAPES)
def test_the_fast_create_answer_is_the_models_answer_byte_for_byte(zone, fields):
    """``job_json`` skips the ``Job`` model; what it renders is what ``json_response`` renders."""
    job = shaped_record(fields)
    tz = ZoneInfo(zone)
    expected = Job.model_validate(job).model_dump_json(context={"tz": tz}, exclude_unset=True).encode()
    assert job_json(job, tz) == expected


def test_the_create_answer_is_the_job_detail_answer(client, job_type):
    """What ``POST /api/jobs/`` answers (both ways: created, and an existing key) is, byte for
    byte, what ``GET`` of its ``Location`` answers, the model-rendered job."""
    body = {"type": job_type, "payload": {"b": [1.5, None], "a": "ü"}, "idempotency_key": "same-bytes"}
    created = client.post("/api/jobs/", json=body)
    existing = client.post("/api/jobs/", json=body)
    assert (created.status_code, existing.status_code) == (201, 200)
    detail = client.get(created.headers["Location"])
    assert created.data == existing.data == detail.data
