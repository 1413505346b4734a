"""/api/queues/: list, one queue, pause, resume, limits; the `queue` field on jobs."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.flow import queues
from dashboard.store.lifecycle import create as enqueue
from tests.support.secured import OPERATOR_TOKEN, VIEWER_TOKEN, build

from .helpers import table_snapshot

QUEUE_FIELDS = {
    "name", "paused", "concurrency_limit", "rate_limit", "ready", "scheduled", "retrying", "running",
    "oldest_ready_wait_seconds", "waiting",
}  # fmt: skip


def queue_rows() -> list[dict]:
    with db.engine.connect() as conn:
        return [dict(r) for r in conn.execute(text("SELECT * FROM jobs_queue ORDER BY name")).mappings()]


def test_create_takes_a_queue_and_every_job_json_carries_it(client, job_type):
    named = client.post("/api/jobs/", json={"type": job_type, "queue": "mail"}).get_json()
    plain = client.post("/api/jobs/", json={"type": job_type}).get_json()
    assert (named["queue"], plain["queue"]) == ("mail", "default")
    bulk = client.post(
        "/api/jobs/bulk/", json={"jobs": [{"type": job_type, "queue": "reports"}, {"type": job_type}]}
    )
    assert [r["job"]["queue"] for r in bulk.get_json()["results"]] == ["reports", "default"]
    listed = client.get("/api/jobs/?queue=mail").get_json()
    assert [j["id"] for j in listed["results"]] == [named["id"]] and listed["count"] == 1


def test_a_handler_default_queue_applies_unless_the_body_names_one(client, job_type):
    from dashboard.runtime import handlers

    handlers.handler(job_type, queue="slow")(lambda context: None)
    assert client.post("/api/jobs/", json={"type": job_type}).get_json()["queue"] == "slow"
    assert client.post("/api/jobs/", json={"type": job_type, "queue": "fast"}).get_json()["queue"] == "fast"


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "ü", 7, "a/b"])
def test_an_invalid_queue_on_create_is_a_400_on_queue_and_writes_nothing(client, job_type, bad):
    before = table_snapshot()
    response = client.post("/api/jobs/", json={"type": job_type, "queue": bad})
    assert response.status_code == 400
    assert "queue" in response.get_json()["errors"]
    assert table_snapshot() == before


def test_list_get_pause_resume_and_limits(client, job_type):
    client.post("/api/jobs/", json={"type": job_type, "queue": "mail"})
    listed = client.get("/api/queues/").get_json()["results"]
    assert [q["name"] for q in listed] == ["mail"]  # default has no jobs here, and no settings
    assert set(listed[0]) == QUEUE_FIELDS and listed[0]["ready"] == 1
    paused = client.post("/api/queues/mail/pause/")
    assert paused.status_code == 200 and paused.get_json()["paused"] is True
    assert client.post("/api/queues/mail/pause/").get_json()["paused"] is True  # twice: a no-op
    assert client.post("/api/queues/mail/resume/").get_json()["paused"] is False
    patched = client.patch(
        "/api/queues/mail/", json={"concurrency_limit": 3, "rate_limit": {"count": 10, "period_seconds": 60}}
    ).get_json()
    assert patched["concurrency_limit"] == 3 and patched["rate_limit"] == {
        "count": 10,
        "period_seconds": 60.0,
    }
    kept = client.patch("/api/queues/mail/", json={"concurrency_limit": None}).get_json()
    assert kept["concurrency_limit"] is None and kept["rate_limit"] == {"count": 10, "period_seconds": 60.0}
    with db.engine.connect() as conn:
        actions = list(conn.execute(text("SELECT action FROM jobs_audit ORDER BY id")).scalars())
    assert actions == ["queue_paused", "queue_resumed", "queue_limits_changed", "queue_limits_changed"]


def test_a_name_with_no_jobs_takes_settings_and_an_unknown_get_is_404(client):
    assert client.get("/api/queues/nothing/").status_code == 404
    answer = client.post("/api/queues/newq/pause/")
    assert answer.status_code == 200 and answer.get_json()["name"] == "newq"
    assert client.get("/api/queues/newq/").get_json()["paused"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"concurrency_limit": 0}, "concurrency_limit"),
        ({"concurrency_limit": 10_001}, "concurrency_limit"),
        ({"concurrency_limit": "3"}, "concurrency_limit"),
        ({"rate_limit": {"count": 0, "period_seconds": 1}}, "rate_limit.count"),
        ({"rate_limit": {"count": 1, "period_seconds": 0}}, "rate_limit.period_seconds"),
        ({"rate_limit": {"count": 1}}, "rate_limit.period_seconds"),
        ({"paused": True}, "paused"),
    ],
)
def test_an_out_of_range_limit_is_a_400_naming_its_field_and_changes_nothing(client, body, field):
    queues.pause("q")
    before = queue_rows()
    response = client.patch("/api/queues/q/", json=body)
    assert response.status_code == 400, response.get_json()
    assert field in response.get_json()["errors"]
    assert queue_rows() == before


@pytest.mark.parametrize(
    "path", ["/api/queues/a%20b/", "/api/queues/a%20b/pause/", "/api/queues/%C3%BC/resume/"]
)
def test_an_invalid_name_is_a_400_on_name_and_creates_nothing(client, path):
    method = client.get if path.endswith("b/") else client.post
    response = method(path)
    assert response.status_code == 400 and "name" in response.get_json()["errors"]
    assert queue_rows() == []


def test_queues_need_a_viewer_to_read_and_an_operator_to_change(app, database_url):
    with build(database_url) as secured_app:
        _check_roles(secured_app.test_client())


def _check_roles(client) -> None:
    assert client.get("/api/queues/").status_code == 401
    viewer = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    assert client.get("/api/queues/", headers=viewer).status_code == 200
    assert client.post("/api/queues/mail/pause/", headers=viewer).status_code == 403
    assert client.patch("/api/queues/mail/", json={"concurrency_limit": 1}, headers=viewer).status_code == 403
    assert queue_rows() == []
    assert client.post("/api/queues/mail/pause/", headers=operator).status_code == 200
    with db.engine.connect() as conn:
        actor = conn.execute(text("SELECT actor FROM jobs_audit")).scalar_one()
    assert actor == "deploy"


def test_enqueue_ignores_nothing_the_store_refuses(app):
    with pytest.raises(ValueError, match="queue"):
        enqueue.create_job(enqueue.JobSpec("demo.success", queue="no way"))
