"""``/api/jobs/stats/detail/`` and the per-job events' ``after_id`` / ``limit``."""

from __future__ import annotations

import uuid
from datetime import timedelta

from dashboard.store import values
from dashboard.store.lifecycle import create as enqueue
from tests.support.factories import make_job

from .helpers import create
from .test_events import claim_and_fail


def test_stats_detail_splits_the_queue_and_keeps_the_reference_stats_shape(client):
    now = values.utcnow()
    make_job("queued", available_at=now - timedelta(minutes=5))
    make_job("queued", available_at=now + timedelta(hours=24))
    make_job("queued", available_at=now + timedelta(minutes=1), attempts=1)
    body = client.get("/api/jobs/stats/detail/").get_json()
    assert body["ready"] == {"count": 1, "exact": True}
    assert body["scheduled"]["count"] == 1 and body["retrying"]["count"] == 1
    assert 300 <= body["oldest_ready_wait_seconds"] < 400
    assert body["types"][0]["type"] == "demo.success" and body["types"][0]["ready"]["count"] == 1
    assert set(body) >= {"minutes", "run_times", "running", "overdue_running"}
    assert body["sampled"] is False and body["sampled_events"] == 10_000
    stats = client.get("/api/jobs/stats/").get_json()
    reference = ["total", "by_status", "overdue_running", "retries_pending", "oldest_queued_at"]
    assert list(stats) == [*reference, "waiting"]  # the reference's shape, one field added
    assert stats["by_status"]["queued"] == 3 and stats["retries_pending"] == 1


def test_job_events_after_id_and_limit(client, job_type):
    job = create(client, job_type, max_attempts=1)
    claim_and_fail(uuid.UUID(job["id"]))
    every = client.get(f"/api/jobs/{job['id']}/events/").get_json()
    assert [e["type"] for e in every] == ["created", "claimed", "failed"]
    after = client.get(f"/api/jobs/{job['id']}/events/?after_id={every[0]['id']}").get_json()
    assert [e["id"] for e in after] == [e["id"] for e in every[1:]]
    one = client.get(f"/api/jobs/{job['id']}/events/?after_id={every[0]['id']}&limit=1").get_json()
    assert [e["type"] for e in one] == ["claimed"]
    for bad in ("after_id=-1", "limit=0", "after_id=x", "limit=99999999999999999999999"):
        assert client.get(f"/api/jobs/{job['id']}/events/?{bad}").status_code == 400


def test_stats_detail_says_when_the_charts_read_only_the_newest_events(client, monkeypatch):
    """The charts read claims and outcomes only: jobs that were created and not run are not
    read at all, three that ran are six events."""
    from dashboard.store import lifecycle
    from dashboard.store.reads import overview as read_overview

    for _ in range(3):
        enqueue.create_job(enqueue.JobSpec("demo.success", {}))
    monkeypatch.setattr(read_overview, "CHART_EVENTS_MAX", 2)
    assert client.get("/api/jobs/stats/detail/").get_json()["sampled"] is False  # no claim, no outcome
    for _ in range(3):
        job = lifecycle.claim_next_job("host:1:thread-1:abcd", lease_seconds=30)
        assert job is not None
        lifecycle.complete_job(job.id, "host:1:thread-1:abcd", 1, {})
    monkeypatch.setattr(read_overview, "CHART_EVENTS_MAX", 5)
    body = client.get("/api/jobs/stats/detail/").get_json()
    assert body["sampled"] is True and body["sampled_events"] == 5
    monkeypatch.setattr(read_overview, "CHART_EVENTS_MAX", 6)
    assert client.get("/api/jobs/stats/detail/").get_json()["sampled"] is True  # 6 of 6: said
    monkeypatch.setattr(read_overview, "CHART_EVENTS_MAX", 7)
    assert client.get("/api/jobs/stats/detail/").get_json()["sampled"] is False
