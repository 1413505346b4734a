"""The operator console's actions under sign-in: viewers see none of them and the server refuses them."""

from __future__ import annotations

from datetime import timedelta

from dashboard.store.reads import jobs as read_jobs
from dashboard.store.values import utcnow
from tests.support.factories import make_job
from tests.support.forms import csrf_token
from tests.support.secured import OPERATOR_TOKEN, VIEWER_TOKEN


def test_viewers_see_no_actions_and_are_refused(app, viewer):
    job = make_job("queued", available_at=utcnow() + timedelta(hours=1))
    assert 'data-action="cancel"' not in viewer.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "data-bulk" not in viewer.get("/jobs/").get_data(as_text=True)
    assert viewer.get("/jobs/bulk/retry/").status_code == 403
    token = csrf_token(viewer, "/jobs/")
    assert viewer.post("/jobs/bulk/cancel/", data={"csrf_token": token}).status_code == 403
    assert viewer.post(f"/jobs/{job.id}/cancel/", data={"csrf_token": token}).status_code == 403
    assert viewer.post(f"/jobs/{job.id}/run-now/", data={"csrf_token": token}).status_code == 403
    assert read_jobs.get_job(job.id).status == "queued"
    assert viewer.get("/workers/").status_code == 200


def test_operator_cancels_with_their_name(app, operator):
    job = make_job("queued")
    assert 'data-bulk="cancel"' in operator.get("/jobs/").get_data(as_text=True)
    token = csrf_token(operator, "/jobs/")
    assert operator.post(f"/jobs/{job.id}/cancel/", data={"csrf_token": token}).status_code == 303
    assert read_jobs.get_job(job.id).last_error == "Cancelled by olga"


def test_api_bulk_needs_an_operator_token(app, anonymous):
    body = {"dry_run": True}
    viewer = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    assert anonymous.post("/api/jobs/bulk-retry/", json=body).status_code == 401
    assert anonymous.post("/api/jobs/bulk-retry/", json=body, headers=viewer).status_code == 403
    assert anonymous.post("/api/jobs/bulk-cancel/", json=body, headers=operator).status_code == 200
    assert anonymous.get("/api/jobs/?q=abcd", headers=viewer).status_code == 200
