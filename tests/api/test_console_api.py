"""The operator console's API extensions: ``q`` on the job list and the bulk actions with dry_run."""

from __future__ import annotations

from datetime import timedelta

from dashboard.store.reads import jobs as read_jobs
from dashboard.store.values import utcnow
from tests.support.factories import make_job


def test_q_finds_by_short_id_key_and_error(app, client):
    job = make_job(
        "failed", idempotency_key="k-1", last_error="BrokenPipe while sending", finished_at=utcnow()
    )
    make_job("queued")
    for q in (str(job.id)[:8], str(job.id), "k-1", "brokenpipe"):
        body = client.get("/api/jobs/", query_string={"q": q}).get_json()
        assert [j["id"] for j in body["results"]] == [str(job.id)], q
    assert client.get("/api/jobs/?q=user=1").get_json()["count"] == 0


def test_any_q_the_schema_allows_is_a_search(app, client):
    # Schema-valid input is accepted (tests/api/test_schemathesis.py): text that is not a valid
    # payload search is searched as text (the pages say what is wrong instead); blank is no search.
    make_job("queued", idempotency_key="{broken")
    response = client.get("/api/jobs/", query_string={"q": "{broken"})
    assert response.status_code == 200 and response.get_json()["count"] == 1
    assert client.get("/api/jobs/", query_string={"q": "   "}).get_json()["count"] == 1


def test_bulk_retry_dry_run_counts_what_the_real_run_changes(app, client):
    for _ in range(4):
        make_job("failed", type="report.build", last_error="x", finished_at=utcnow())
    make_job("failed", type="other", last_error="x", finished_at=utcnow())
    dry = client.post("/api/jobs/bulk-retry/", json={"type": "report", "dry_run": True}).get_json()
    assert dry == {"action": "retry", "dry_run": True, "count": 4}
    real = client.post("/api/jobs/bulk-retry/", json={"type": "report", "dry_run": False}).get_json()
    assert real["count"] == 4
    assert (
        client.post("/api/jobs/bulk-retry/", json={"type": "report", "dry_run": True}).get_json()["count"]
        == 0
    )


def test_bulk_cancel_and_run_now_write_their_events(app, client):
    later = make_job("queued", available_at=utcnow() + timedelta(hours=1))
    assert client.post("/api/jobs/bulk-run-now/", json={"dry_run": False}).get_json()["count"] == 1
    events = client.get(f"/api/jobs/{later.id}/events/").get_json()
    assert events[-1]["type"] == "rescheduled"
    assert (
        client.post("/api/jobs/bulk-cancel/", json={"dry_run": False, "status": "queued"}).get_json()["count"]
        == 1
    )
    assert read_jobs.get_job(later.id).status == "failed"
    assert client.get(f"/api/jobs/{later.id}/events/").get_json()[-1]["type"] == "cancelled"
    feed = client.get("/api/job-events/?type=cancelled").get_json()
    assert len(feed["results"]) == 1


def test_bulk_refuses_bad_bodies(app, client):
    assert client.post("/api/jobs/bulk-retry/", json={}).status_code == 400  # dry_run is required
    assert client.post("/api/jobs/bulk-retry/", json={"dry_run": True, "status": "queued"}).status_code == 400
    answer = client.post("/api/jobs/bulk-cancel/", json={"dry_run": True, "q": "{x"})
    assert answer.status_code == 200 and answer.get_json()["count"] == 0  # searched as text
    assert client.post("/api/jobs/bulk-cancel/", json={"dry_run": "yes"}).status_code == 400


def test_schema_documents_the_extensions(app, client):
    schema = client.get("/api/schema/").get_json()
    assert "/api/jobs/bulk-retry/" in schema["paths"]
    assert "cancelled" in str(schema) and "rescheduled" in str(schema)
