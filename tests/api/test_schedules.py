"""``/api/schedules/``: the rows as the workers declared them, pause, resume and run now; a
schedule's runs one search away (``/api/jobs/?q=schedule:{name}``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from dashboard.store.flow.schedules import Declaration, fire_due, sync
from dashboard.store.reads import jobs as read_jobs

T0 = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
NIGHTLY = Declaration("nightly", "0 6 * * *", "Europe/Berlin", "demo.success", {"r": 1}, "reports", 60, 5)
TICK = Declaration("tick", "* * * * *", "UTC", "demo.success", {}, "default", 50, 3, "all")


def test_the_list_shows_each_schedule_with_its_template_next_runs_and_state(client):
    sync([NIGHTLY, TICK], now=T0)
    fire_due(now=T0 + timedelta(minutes=3))
    body = client.get("/api/schedules/").get_json()
    assert [s["name"] for s in body["results"]] == ["nightly", "tick"]
    nightly, tick = body["results"]
    assert nightly["cron"] == "0 6 * * *" and nightly["timezone"] == "Europe/Berlin"
    assert nightly["description"] == "At 06:00 every day (Europe/Berlin)"
    assert nightly["job"] == {
        "type": "demo.success",
        "payload": {"r": 1},
        "queue": "reports",
        "priority": 60,
        "max_attempts": 5,
        "unique_key": None,
        "unique_for": None,
        "unique_while": None,
    }
    assert nightly["state"] == "active" and nightly["paused"] is False and nightly["missed"] == "latest"
    assert nightly["next_run_at"] == "2026-06-02T04:00:00+00:00"  # 06:00 CEST
    assert len(nightly["next_runs"]) == 5 and nightly["next_runs"][1] == "2026-06-03T04:00:00+00:00"
    assert nightly["last_job_id"] is None and nightly["key_prefix"] == "schedule:nightly:"
    assert tick["last_run_at"] == "2026-06-01T12:03:00+00:00" and tick["last_job_status"] == "queued"
    assert tick["fired_count"] == 3 and tick["skipped_count"] == 0
    one = client.get("/api/schedules/tick/").get_json()
    assert one == tick


def test_the_job_template_carries_the_schedules_unique_options(client):
    report = replace(TICK, name="report", unique_key="report:daily", unique_for=600.0, unique_while="queued")
    sync([report, TICK], now=T0)
    listed = {s["name"]: s for s in client.get("/api/schedules/").get_json()["results"]}
    job = client.get("/api/schedules/report/").get_json()["job"]
    assert job == listed["report"]["job"]
    assert (job["unique_key"], job["unique_for"], job["unique_while"]) == ("report:daily", 600.0, "queued")
    assert {listed["tick"]["job"][k] for k in ("unique_key", "unique_for", "unique_while")} == {None}
    # a key without a window: no limit
    sweep = Declaration("sweep", "0 * * * *", "UTC", "demo.success", {}, "default", 50, 3)
    sync([replace(sweep, unique_key="sweep", unique_while="active")], now=T0)
    swept = client.get("/api/schedules/sweep/").get_json()["job"]
    assert (swept["unique_key"], swept["unique_for"], swept["unique_while"]) == ("sweep", None, "active")


def test_an_unknown_schedule_is_a_404_for_every_path(client):
    for name in ("nope", "a%20b", "%00", "x" * 65, "%F0%9F%92%A5", "a:b"):
        assert client.get(f"/api/schedules/{name}/").status_code == 404, name
        for action in ("pause", "resume", "run"):
            response = client.post(f"/api/schedules/{name}/{action}/")
            assert response.status_code == 404 and response.get_json() == {"detail": "Not found."}


def test_pause_and_resume_answer_the_schedule_and_resume_starts_after_now(client):
    sync([TICK], now=T0)
    paused = client.post("/api/schedules/tick/pause/")
    assert paused.status_code == 200 and paused.get_json()["paused"] is True
    assert paused.get_json()["state"] == "paused" and paused.get_json()["paused_by"] == "anonymous"
    assert client.post("/api/schedules/tick/pause/").status_code == 200  # twice: a no-op
    before = datetime.now(UTC)
    resumed = client.post("/api/schedules/tick/resume/").get_json()
    assert resumed["paused"] is False
    # the first slot after now, not the slots that passed while paused (since T0)
    assert datetime.fromisoformat(resumed["next_run_at"]) > before


def test_run_now_enqueues_one_job_under_the_prefix_and_a_search_finds_the_runs(client):
    sync([TICK], now=T0)
    fire_due(now=T0 + timedelta(minutes=2))
    response = client.post("/api/schedules/tick/run/")
    assert response.status_code == 201
    job = response.get_json()
    assert job["type"] == "demo.success" and job["status"] == "queued"
    assert job["idempotency_key"].startswith("schedule:tick:") and ":now:" in job["idempotency_key"]
    [created] = read_jobs.job_events(job["id"])
    assert created.data["source"] == "api" and created.data["run_now"] is True
    assert created.data["schedule"] == "tick"
    for q in ("schedule:tick", "schedule:tick:"):
        found = client.get("/api/jobs/", query_string={"q": q}).get_json()
        assert found["count"] == 3, q  # two slots and the run now
        assert all(r["idempotency_key"].startswith("schedule:tick:") for r in found["results"])
    assert client.get("/api/jobs/", query_string={"q": "schedule:tic"}).get_json()["count"] == 0


def test_a_retired_schedule_cannot_be_run(client):
    sync([TICK], now=T0)
    sync([], now=T0)
    response = client.post("/api/schedules/tick/run/")
    assert response.status_code == 409 and "retired" in response.get_json()["detail"]
    assert client.get("/api/schedules/tick/").get_json()["state"] == "retired"
    assert client.get("/api/schedules/tick/").get_json()["next_runs"] == []
