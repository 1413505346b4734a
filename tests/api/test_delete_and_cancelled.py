"""The API's delete (single and bulk, dry run first) and its cancelled filters: a cancelled job
keeps the reference's shape (status failed, no added field), and lists and bulk retries tell
it apart."""

from __future__ import annotations

from dashboard.store import audit
from dashboard.store.lifecycle import actions
from dashboard.store.reads import jobs as read_jobs
from tests.support.factories import make_job

from .helpers import JOB_FIELDS


def _cancelled():
    job = make_job("queued", type="mail.send")
    actions.run_one("cancel", job.id, event_data={"actor": "olga"})
    return job


def test_a_cancelled_job_keeps_the_reference_shape_and_lists_apart(app, client):
    cancelled = _cancelled()
    failure = make_job("failed", type="mail.send")
    body = client.get(f"/api/jobs/{cancelled.id}/").get_json()
    assert (
        list(body) == JOB_FIELDS and body["status"] == "failed" and body["last_error"] == "Cancelled by olga"
    )
    ids = lambda query: [j["id"] for j in client.get(f"/api/jobs/?{query}").get_json()["results"]]  # noqa: E731
    assert set(ids("status=failed")) == {str(cancelled.id), str(failure.id)}  # exact status, as ever
    assert ids("status=failed&cancelled=false") == [str(failure.id)]
    assert ids("cancelled=true") == [str(cancelled.id)]
    assert client.get("/api/jobs/?cancelled=maybe").status_code == 400
    stats = client.get("/api/jobs/stats/").get_json()
    assert stats["by_status"]["failed"] == 2  # the reference's stats count the stored statuses


def test_bulk_retry_leaves_cancelled_jobs_out_unless_asked(app, client):
    cancelled = _cancelled()
    make_job("failed")
    dry = client.post("/api/jobs/bulk-retry/", json={"dry_run": True}).get_json()
    assert dry == {"action": "retry", "dry_run": True, "count": 1}
    assert (
        client.post("/api/jobs/bulk-retry/", json={"dry_run": True, "include_cancelled": True}).get_json()[
            "count"
        ]
        == 2
    )
    assert (
        client.post("/api/jobs/bulk-retry/", json={"dry_run": True, "cancelled": True}).get_json()["count"]
        == 1
    )
    assert client.post("/api/jobs/bulk-retry/", json={"dry_run": False}).get_json()["count"] == 1
    assert read_jobs.get_job(cancelled.id).status == "failed"


def test_bulk_delete_dry_run_then_delete(app, client):
    for _ in range(2):
        make_job("succeeded", type="mail.send")
    make_job("failed", type="mail.send")
    kept = make_job("queued", type="mail.send")
    assert client.post("/api/jobs/bulk-delete/", json={"dry_run": True}).get_json() == {
        "action": "delete",
        "dry_run": True,
        "count": 3,
    }
    assert (
        client.post("/api/jobs/bulk-delete/", json={"dry_run": True, "status": "failed"}).get_json()["count"]
        == 1
    )
    refused = client.post("/api/jobs/bulk-delete/", json={"dry_run": True, "status": "queued"})
    assert refused.status_code == 400 and "status" in refused.get_json()["errors"]
    assert (
        client.post("/api/jobs/bulk-delete/", json={"status": "failed"}).status_code == 400
    )  # dry_run required
    done = client.post("/api/jobs/bulk-delete/", json={"dry_run": False, "type": "mail"}).get_json()
    assert done["count"] == 3
    assert [j["id"] for j in client.get("/api/jobs/").get_json()["results"]] == [str(kept.id)]
    assert len(audit.page().entries) == 3


def test_delete_one_finished_job(app, client):
    done = make_job("succeeded")
    live = make_job("running")
    assert client.delete(f"/api/jobs/{done.id}/").status_code == 204
    assert client.get(f"/api/jobs/{done.id}/").status_code == 404
    assert client.delete(f"/api/jobs/{done.id}/").status_code == 404
    conflict = client.delete(f"/api/jobs/{live.id}/")
    assert conflict.status_code == 409 and conflict.get_json()["status"] == "running"
    (entry,) = audit.for_job(done.id)
    assert entry.data["source"] == "api"
