"""The job page's folded timeline and its small live poll (issue 18)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from dashboard.store import read_jobs, service

HX = {"HX-Request": "true"}
WORKER = "w:1:thread-1:aaaa"


def _long_running_job():
    job = service.create_job("demo.slow").job
    claimed = service.claim_next_job(WORKER, lease_seconds=30)
    assert claimed is not None and claimed.id == job.id
    for percent in range(0, 100, 1):
        service.record_progress(job.id, WORKER, 1, message="x" * 40, data={"percent": percent})
        if percent % 10 == 0:
            service.renew_lease(job.id, WORKER, 1, lease_seconds=30)
    return job


def test_progress_and_renewals_fold_into_one_line_and_the_poll_sends_only_what_changed(app, client):
    job = _long_running_job()
    page = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert "+ 100 progress, 10 lease renewals, latest 99 % so far" in page
    assert page.count('data-event-type="progress"') == 0
    poll = re.search(r'hx-get="(/jobs/[^"]+/live/[^"]+)"', page).group(1).replace("&amp;", "&")
    response = client.get(poll, headers=HX)
    body = response.get_data()
    assert response.status_code == 200 and len(body) < 10_000, len(body)
    assert b"99 %" in body and b'hx-swap-oob="true"' in body and b"beforeend:#timeline" not in body

    service.complete_job(job.id, WORKER, 1, {"ok": True})
    done = client.get(poll, headers=HX)
    assert done.headers["HX-Retarget"] == "#job-detail" and done.headers["HX-Reswap"] == "morph"
    assert b'data-status="succeeded"' in done.get_data()


def test_new_lifecycle_events_are_appended_after_the_last_shown(app, client):
    later = datetime.now(UTC) + timedelta(hours=1)
    job = service.create_job("demo.success", available_at=later).job
    created = read_jobs.job_events(job.id)[0].id
    response = client.get(f"/jobs/{job.id}/live/?after={created}&status=queued", headers=HX)
    assert b"beforeend:#timeline" not in response.get_data()  # nothing new yet

    assert service.run_job_now(job.id, event_data={"actor": "ops"}).changed  # queued -> queued
    rescheduled = read_jobs.job_events(job.id)[-1]
    assert rescheduled.type == "rescheduled"
    body = client.get(f"/jobs/{job.id}/live/?after={created}&status=queued", headers=HX).get_data()
    assert b"beforeend:#timeline" in body
    assert f'data-event-id="{rescheduled.id}"'.encode() in body
    assert f'data-event-id="{created}"'.encode() not in body
    for bad in ("after=x", "after=-1", "status=%00"):
        assert client.get(f"/jobs/{job.id}/live/?{bad}", headers=HX).status_code == 200
    assert client.get("/jobs/nope/live/").status_code == 404
