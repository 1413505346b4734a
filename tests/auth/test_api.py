"""The API with tokens configured: every endpoint against every kind of caller."""

from __future__ import annotations

import logging
import uuid

import pytest

from dashboard.api import routes
from dashboard.store.flow import schedules
from dashboard.store.reads import jobs as read_jobs
from tests.support.factories import make_job
from tests.support.secured import OPERATOR_TOKEN, VIEWER_TOKEN, bearer
from tests.support.timelines import table_snapshot

OPEN = {"health", "ready", "schema", "docs"}
NIGHTLY = schedules.Declaration("nightly", "0 6 * * *", "UTC", "demo.success", {}, "default", 50, 3)
WRITES = {
    "queue_pause",
    "queue_resume",
    "queue_limits",
    "create_job",
    "create_jobs",
    "job_retry",
    "bulk_retry",
    "bulk_cancel",
    "bulk_run_now",
    "bulk_delete",
    "job_delete",
    "schedule_pause",
    "schedule_resume",
    "schedule_run",
    "workflow_cancel",
    "workflow_retry",
}


def endpoint_request(name: str, job_id: uuid.UUID) -> tuple[str, str, dict | None]:
    """(method, path, body) of a valid request to the endpoint ``name``."""
    paths = {
        "health": "/api/health/",
        "ready": "/api/ready/",
        "config": "/api/config/",
        "create_job": "/api/jobs/",
        "create_jobs": "/api/jobs/bulk/",
        "job_list": "/api/jobs/",
        "job_stats": "/api/jobs/stats/",
        "job_stats_detail": "/api/jobs/stats/detail/",
        "job_detail": f"/api/jobs/{job_id}/",
        "job_events": f"/api/jobs/{job_id}/events/",
        "job_retry": f"/api/jobs/{job_id}/retry/",
        "event_feed": "/api/job-events/",
        "schema": "/api/schema/",
        "docs": "/api/docs/",
        "bulk_retry": "/api/jobs/bulk-retry/",
        "bulk_cancel": "/api/jobs/bulk-cancel/",
        "bulk_run_now": "/api/jobs/bulk-run-now/",
        "bulk_delete": "/api/jobs/bulk-delete/",
        "job_delete": f"/api/jobs/{job_id}/",
        "schedule_list": "/api/schedules/",
        "schedule_detail": "/api/schedules/nightly/",
        "schedule_pause": "/api/schedules/nightly/pause/",
        "schedule_resume": "/api/schedules/nightly/resume/",
        "schedule_run": "/api/schedules/nightly/run/",
        "queue_list": "/api/queues/",
        "queue_detail": "/api/queues/default/",
        "queue_pause": "/api/queues/mail/pause/",
        "queue_resume": "/api/queues/mail/resume/",
        "queue_limits": "/api/queues/mail/",
        "workflow_detail": "/api/workflows/nightly-run/",
        "workflow_cancel": "/api/workflows/nightly-run/cancel/",
        "workflow_retry": "/api/workflows/nightly-run/retry/",
    }
    bodies = {
        "create_job": {"type": "demo.success"},
        "create_jobs": {"jobs": [{"type": "demo.success"}]},
        "bulk_retry": {"dry_run": True},
        "bulk_cancel": {"dry_run": True},
        "bulk_run_now": {"dry_run": True},
        "bulk_delete": {"dry_run": True},
        "queue_limits": {"concurrency_limit": 2},
    }
    registered = {ep.name: ep.method for ep in routes.endpoints}
    assert set(registered) == set(paths), "a new endpoint needs a row here"
    return registered[name], paths[name], bodies.get(name)


def call(client, method: str, path: str, body: dict | None, headers: dict[str, str]):
    return client.open(path, method=method, json=body, headers=headers)


def test_every_endpoint_against_every_kind_of_caller(app, secured_app):
    schedules.sync([NIGHTLY])
    make_job("failed", workflow="nightly-run")
    client = secured_app.test_client()
    for name in sorted(ep.name for ep in routes.endpoints):
        job = make_job("failed")  # a fresh failed job for each endpoint, so each retry succeeds
        method, path, body = endpoint_request(name, job.id)
        anonymous = call(client, method, path, body, {})
        wrong = call(client, method, path, body, bearer("not-a-token-" + "x" * 30))
        viewer = call(client, method, path, body, bearer(VIEWER_TOKEN))
        if name in OPEN:
            assert anonymous.status_code == 200, name
            continue
        for refused in (anonymous, wrong):
            assert refused.status_code == 401, name
            assert refused.get_json()["detail"], name
            assert refused.headers["WWW-Authenticate"].startswith('Bearer realm="job-queue"'), name
        if name in WRITES:
            assert viewer.status_code == 403, name
            assert "operator token" in viewer.get_json()["detail"]
            operator = call(client, method, path, body, bearer(OPERATOR_TOKEN))
            assert operator.status_code in (200, 201, 204), (name, operator.get_json())
        else:
            assert viewer.status_code == 200, (name, viewer.get_json())
            operator = call(client, method, path, body, bearer(OPERATOR_TOKEN))
            assert operator.status_code == 200, name


@pytest.mark.parametrize(
    ("header", "error"),
    [
        (f"Basic {VIEWER_TOKEN}", "invalid_request"),
        ("Bearer", "invalid_request"),
        ("Bearer   ", "invalid_request"),
        (f"Bearer {VIEWER_TOKEN} extra", "invalid_request"),
        (f"Bearer {VIEWER_TOKEN}x", "invalid_token"),
        ("Bearer sha256:" + "ab" * 32, "invalid_token"),  # a digest is not a token
    ],
)
def test_malformed_or_wrong_tokens_are_401_json(app, secured_app, header, error):
    response = secured_app.test_client().get("/api/jobs/", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.mimetype == "application/json"
    assert f'error="{error}"' in response.headers["WWW-Authenticate"]


def test_scheme_is_case_insensitive(app, secured_app):
    response = secured_app.test_client().get(
        "/api/jobs/", headers={"Authorization": f"bearer {VIEWER_TOKEN}"}
    )
    assert response.status_code == 200


def test_a_refused_write_changes_nothing(app, secured_app):
    job = make_job("failed")
    before = table_snapshot()
    client = secured_app.test_client()
    for headers in ({}, bearer(VIEWER_TOKEN), bearer("x" * 40)):
        client.post("/api/jobs/", json={"type": "demo.success"}, headers=headers)
        client.post("/api/jobs/bulk/", json={"jobs": [{"type": "demo.success"}]}, headers=headers)
        client.post(f"/api/jobs/{job.id}/retry/", headers=headers)
    assert table_snapshot() == before
    assert read_jobs.get_job(job.id).status == "failed"


def test_cors_preflight_passes_without_a_token(app, database_url):
    from tests.support.secured import build

    with build(database_url, CORS_ALLOWED_ORIGINS="https://ops.example") as secured:
        response = secured.test_client().options(
            "/api/jobs/",
            headers={
                "Origin": "https://ops.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )
    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == "https://ops.example"


def test_tokens_never_reach_the_logs(app, secured_app, caplog):
    caplog.set_level(logging.DEBUG)
    client = secured_app.test_client()
    client.get("/api/jobs/", headers=bearer(VIEWER_TOKEN))
    client.get("/api/jobs/", headers=bearer(OPERATOR_TOKEN + "wrong"))
    client.post("/api/jobs/", json={"type": "demo.success"}, headers=bearer(VIEWER_TOKEN))
    client.post("/api/jobs/", json={"type": "no.such.type"}, headers=bearer(OPERATOR_TOKEN))
    refusals = [r.getMessage() for r in caplog.records if "API request refused" in r.getMessage()]
    assert len(refusals) == 2 and "'grafana' has the viewer role" in refusals[1]
    assert VIEWER_TOKEN not in caplog.text and OPERATOR_TOKEN not in caplog.text


def test_the_schema_documents_bearer_auth_and_its_refusals(app, secured_app):
    doc = secured_app.test_client().get("/api/schema/").get_json()
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    assert doc["security"] == [{"bearerAuth": []}]
    assert doc["paths"]["/api/health/"]["get"]["security"] == []
    assert "401" in doc["paths"]["/api/jobs/"]["get"]["responses"]
    assert "403" in doc["paths"]["/api/jobs/"]["post"]["responses"]
    assert "403" not in doc["paths"]["/api/jobs/"]["get"]["responses"]


def test_the_api_ignores_the_dashboard_session(app, operator):
    """A signed-in operator's session cookie is no credential for the API (401 without a
    token), and the API neither reads nor re-sends it: no Set-Cookie, no ``Vary: Cookie``. The
    same cookie still signs the dashboard in."""
    refused = operator.post("/api/jobs/", json={"type": "demo.success"})
    assert refused.status_code == 401
    created = operator.post("/api/jobs/", json={"type": "demo.success"}, headers=bearer(OPERATOR_TOKEN))
    assert created.status_code == 201
    bare = operator.get("/api")  # the API's own 404, without the slash
    assert bare.status_code == 404 and bare.is_json
    for response in (refused, created, bare):
        assert "Set-Cookie" not in response.headers
        assert "Cookie" not in response.headers.get("Vary", "")
    page = operator.get("/")
    assert page.status_code == 200
    assert "Cookie" in page.headers.get("Vary", "")
