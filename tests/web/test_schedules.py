"""The Schedules page: each schedule in words, next runs, last runs with their jobs, paused or
retired; pause, resume and run now through forms (CSRF); the job page links a run back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dashboard.store import read_schedules
from dashboard.store.schedules import Declaration, fire_due, sync
from tests.support.forms import HX, csrf_token

T0 = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
NIGHTLY = Declaration("nightly", "0 6 * * *", "Europe/Berlin", "demo.success", {"r": 1}, "reports", 50, 3)
TICK = Declaration("tick", "* * * * *", "UTC", "demo.success", {}, "default", 50, 3, "all")
OLD = Declaration("old", "0 0 * * *", "UTC", "demo.success", {}, "default", 50, 3)


def test_the_page_shows_each_schedule_in_words_with_next_and_last_runs(app, client):
    sync([NIGHTLY, OLD, TICK], now=T0)
    sync([NIGHTLY, TICK], now=T0)  # old is retired
    fire_due(now=T0 + timedelta(minutes=2))
    response = client.get("/schedules/")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert 'aria-current="page">Schedules</a>' in html  # linked from the header
    assert "At 06:00 every day (Europe/Berlin)" in html and '<code data-field="cron">0 6 * * *</code>' in html
    assert html.count('data-schedule="') == 3
    assert 'data-schedule="old" data-state="retired"' in html and "the code no longer declares it" in html
    nightly = html.split('id="schedule-nightly"')[1].split("</section>")[0]
    assert nightly.count("<li><time") == 5 and "No run yet." in nightly
    assert "Tue 02 Jun 06:00 Europe/Berlin" in nightly  # each next run on the schedule's own clock too
    tick = html.split('id="schedule-tick"')[1].split("</section>")[0]
    assert tick.count("data-run=") == 2 and "status-queued" in tick
    assert "/jobs/?q=schedule%3Atick%3A" in tick or "/jobs/?q=schedule:tick:" in tick
    fragment = client.get("/schedules/", headers=HX).get_data(as_text=True)
    assert "<html" not in fragment
    assert 'id="schedules"' in fragment


def test_pause_resume_and_run_now_through_the_forms(app, client):
    sync([TICK], now=T0)
    token = csrf_token(client, "/schedules/")
    paused = client.post("/schedules/tick/pause/", data={"csrf_token": token})
    assert paused.status_code == 303 and paused.headers["Location"].endswith("/schedules/#schedule-tick")
    assert read_schedules.get_schedule("tick").paused
    html = client.get("/schedules/").get_data(as_text=True)
    assert 'data-state="paused"' in html and 'data-action="resume"' in html and "None while paused." in html
    client.post("/schedules/tick/resume/", data={"csrf_token": token})
    assert not read_schedules.get_schedule("tick").paused
    ran = client.post("/schedules/tick/run/", data={"csrf_token": token}, follow_redirects=True)
    html = ran.get_data(as_text=True)
    assert "a run was enqueued now" in html
    assert "run now</td>" in html.split('id="schedule-tick"')[1]


def test_a_form_without_its_token_changes_nothing(app, client):
    sync([TICK], now=T0)
    assert client.post("/schedules/tick/pause/").status_code == 400
    assert not read_schedules.get_schedule("tick").paused
    token = csrf_token(client, "/schedules/")
    for name in ("nope", "%00", "a%20b"):
        for action in ("pause", "resume", "run"):
            assert client.post(f"/schedules/{name}/{action}/", data={"csrf_token": token}).status_code == 404


def test_a_run_links_back_to_its_schedule_and_the_search_lists_its_runs(app, client):
    sync([TICK], now=T0)
    [fired] = fire_due(now=T0 + timedelta(minutes=1))
    job_id = fired.runs[0].job_id
    html = client.get(f"/jobs/{job_id}/").get_data(as_text=True)
    assert '<a href="/schedules/#schedule-tick" data-field="schedule-link">tick</a>' in html
    fire_due(now=T0 + timedelta(minutes=2))
    listed = client.get("/jobs/", query_string={"q": "schedule:tick:"}).get_data(as_text=True)
    assert str(job_id)[:8] in listed and "schedule runs" in listed
