"""Health, config, stats and retry."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from dashboard.config import settings_of
from dashboard.runtime import handlers
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.states import WAITING_AT
from tests.support.factories import make_job

from .helpers import JOB_FIELDS, another_app, create, table_snapshot

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/x"


def test_health_ok(client):
    response = client.get("/api/health/")
    assert response.status_code == 200
    assert response.get_json() == {"ok": True, "database": "ok"}


def test_health_503_when_the_database_cannot_be_reached_with_the_reason_in_development(app):
    with another_app(DATABASE_URL=UNREACHABLE, DEBUG="true") as down:
        response = down.test_client().get("/api/health/")
    assert response.status_code == 503
    body = response.get_json()
    assert list(body) == ["ok", "database", "detail"]
    assert (body["ok"], body["database"]) == (False, "error")
    assert "127.0.0.1" in body["detail"]


def test_other_endpoints_answer_503_json_when_the_database_is_down(app):
    with another_app(DATABASE_URL=UNREACHABLE) as down:
        response = down.test_client().get("/api/jobs/")
    assert response.status_code == 503
    assert response.get_json() == {"detail": "Database unavailable."}


def test_config_shows_worker_settings_and_registered_types(client, app, job_type):
    response = client.get("/api/config/")
    assert response.status_code == 200
    body = response.get_json()
    assert body == {**settings_of(app).worker.as_dict(), "job_types": handlers.registered_types()}
    assert job_type in body["job_types"]
    assert body["JOB_WORKER_THREADS"] == 8  # the test app's setting, not the default


def test_stats_shape_and_counts(client):
    assert client.get("/api/jobs/stats/").get_json() == {
        "total": 0,
        "by_status": {"queued": 0, "running": 0, "succeeded": 0, "failed": 0},
        "overdue_running": 0,
        "retries_pending": 0,
        "oldest_queued_at": None,
        "waiting": 0,
    }
    oldest = datetime(2026, 1, 1, tzinfo=UTC)
    make_job("queued", created_at=oldest)
    make_job("queued", attempts=1)
    make_job("running", locked_until=datetime.now(UTC) - timedelta(minutes=1))
    make_job("succeeded")
    make_job("failed")
    make_job("queued", available_at=WAITING_AT, depends_on=[uuid.uuid4()], waiting_on=1, created_at=oldest)
    response = client.get("/api/jobs/stats/")
    assert response.status_code == 200
    assert response.get_json() == {
        "total": 6,
        "by_status": {"queued": 3, "running": 1, "succeeded": 1, "failed": 1},
        "overdue_running": 1,
        "retries_pending": 1,
        "oldest_queued_at": "2026-01-01T00:00:00+00:00",
        "waiting": 1,  # waiting for a parent: apart, and still within queued
    }


def test_retry_requeues_a_failed_job_and_records_the_source(client):
    job = make_job("failed", last_error="boom")
    response = client.post(f"/api/jobs/{job.id}/retry/")
    assert response.status_code == 200
    body = response.get_json()
    assert list(body) == JOB_FIELDS
    assert (body["status"], body["attempts"], body["last_error"], body["finished_at"]) == (
        "queued",
        0,
        "",
        None,
    )
    events = client.get(f"/api/jobs/{job.id}/events/").get_json()
    assert events[-1]["type"] == "manual_retry"
    assert events[-1]["data"]["source"] == "api"


def test_retry_needs_no_body_and_ignores_one(client):
    job = make_job("failed")
    response = client.post(f"/api/jobs/{job.id}/retry/", data="not json", content_type="text/plain")
    assert response.status_code == 200


@pytest.mark.parametrize("status", ["queued", "running", "succeeded"])
def test_retry_of_a_job_that_is_not_failed_is_409_naming_its_status(client, status):
    job = make_job(status)
    before = table_snapshot()
    response = client.post(f"/api/jobs/{job.id}/retry/")
    assert response.status_code == 409
    assert response.get_json() == {
        "detail": f"Only failed jobs can be retried; this job is {status}.",
        "status": status,
    }
    assert table_snapshot() == before


def test_retry_of_unknown_or_malformed_id_is_404(client):
    assert client.post(f"/api/jobs/{uuid.uuid4()}/retry/").get_json() == {"detail": "Not found."}
    assert client.post("/api/jobs/123/retry/").status_code == 404


def test_api_create_is_seen_by_the_engine(client, job_type):
    job = create(client, job_type)
    assert read_jobs.get_job(uuid.UUID(job["id"])) is not None


def test_health_in_production_says_only_error_and_logs_the_detail(app, caplog):
    import logging

    with caplog.at_level(logging.WARNING), another_app(DATABASE_URL=UNREACHABLE) as production:
        response = production.test_client().get("/api/health/")
    assert response.status_code == 503
    assert response.get_json() == {"ok": False, "database": "error"}
    body = response.get_data(as_text=True)
    assert "127.0.0.1" not in body and "5432" not in body and "port" not in body
    assert any("127.0.0.1" in record.getMessage() for record in caplog.records)


def test_ready_in_production_names_no_host_and_logs_the_detail(app, caplog):
    """/api/ready/ is open like /api/health/: outside DEBUG the driver's message (host, port)
    stays in the log."""
    import logging

    with caplog.at_level(logging.WARNING), another_app(DATABASE_URL=UNREACHABLE) as production:
        response = production.test_client().get("/api/ready/")
    assert response.status_code == 503
    body = response.get_json()
    assert (body["database"], body["reason"]) == ("error", "database unreachable")
    text = response.get_data(as_text=True)
    assert "127.0.0.1" not in text and "port" not in text
    assert any("127.0.0.1" in record.getMessage() for record in caplog.records)
