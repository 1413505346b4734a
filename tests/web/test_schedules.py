"""The Schedules page: each schedule in words, next runs, last runs with their jobs, paused or
retired; pause, resume and run now through forms (CSRF); the job page links a run back."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from dashboard.extensions import db
from dashboard.runtime import schedules as declared_schedules
from dashboard.store.flow.schedules import Declaration, fire_due, sync
from dashboard.store.reads import schedules as read_schedules
from dashboard.store.values import utcnow
from tests.support.factories import make_job
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


def test_a_schedules_unique_options_are_shown_in_words_only_when_set(app, client):
    held = replace(
        NIGHTLY, name="held", unique_key="nightly:<report>", unique_for=600.0, unique_while="queued"
    )
    open_ended = replace(TICK, name="open", unique_key="sweep", unique_while="active")
    odd = replace(TICK, name="odd", unique_key="k", unique_for=90.0, unique_while="active")
    sync([held, open_ended, odd, NIGHTLY], now=T0)
    html = client.get("/schedules/").get_data(as_text=True)
    section = {
        name: html.split(f'id="schedule-{name}"')[1].split("</section>")[0]
        for name in ("held", "open", "odd", "nightly")
    }
    assert 'data-field="unique"' not in section["nightly"] and ">unique</dt>" not in section["nightly"]
    unique = section["held"].split('data-field="unique">')[1].split("</dd>")[0]
    assert unique.startswith('key <span class="mono wrap">nightly:&lt;report&gt;</span>, for ')
    assert '<span data-seconds="600.0">10 min</span>, while queued <span class="muted">' in unique
    assert "holding the key is in those states, within that time of its creation)" in unique
    open_words = section["open"].split('data-field="unique">')[1].split("</dd>")[0]
    assert (
        ", while queued or running" in open_words
        and ", for" not in open_words
        and "within that time" not in open_words
    )
    assert ">90 s</span>, while queued or running" in section["odd"]  # not rounded down to 1 min


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


def _finished_run(schedule: str, at: datetime, status: str) -> None:
    error = {"last_error": "CRMDown: 503"} if status == "failed" else {}
    make_job(status, idempotency_key=f"schedule:{schedule}:{at:%Y-%m-%dT%H:%M:%SZ}", now=at, **error)


def test_late_and_failing_schedules_show_on_the_page_and_the_overview(app, client):
    now = utcnow().replace(microsecond=0)
    crm = Declaration("crm", "*/5 * * * *", "UTC", "demo.success", {}, "default", 50, 3)
    sync([NIGHTLY, TICK, crm])  # every next run after the database's now: none late
    with db.engine.begin() as conn:  # no worker fired nightly for ten minutes: late
        conn.execute(
            text("UPDATE jobs_schedule SET next_run_at = now() - interval '10 min' WHERE name = 'nightly'")
        )
    _finished_run("tick", now - timedelta(minutes=6), "succeeded")  # before its last five runs
    for minutes in (5, 4, 3, 2, 1):
        _finished_run("tick", now - timedelta(minutes=minutes), "failed")  # every recent run failed
    for minutes, status in ((3, "failed"), (1, "succeeded")):
        _finished_run("crm", now - timedelta(minutes=minutes), status)  # failed once, then ran
    html = client.get("/schedules/").get_data(as_text=True)
    nightly = html.split('id="schedule-nightly"')[1].split("</section>")[0]
    tick = html.split('id="schedule-tick"')[1].split("</section>")[0]
    fine = html.split('id="schedule-crm"')[1].split("</section>")[0]
    assert 'data-schedule="nightly" data-state="active" data-health="late"' in html
    assert '<span class="badge warn-text" data-field="state">late</span>' in nightly
    assert 'data-field="late"' in nightly and "--no-schedules" in nightly
    assert 'data-schedule="tick" data-state="active" data-health="failing"' in html
    assert '<span class="badge status-failed" data-field="state">failing</span>' in tick
    assert 'data-field="failing"' in tick and "each of its last 5 runs failed" in tick
    assert 'data-schedule="crm" data-state="active">' in html and 'data-field="failing"' not in fine
    assert '<span class="badge schedule-active" data-field="state">active</span>' in fine
    attention = html.split("data-attention")[1].split("</div>")[0]
    assert "2 schedules need attention" in attention and "crm" not in attention
    overview = client.get("/").get_data(as_text=True)
    notice = overview.split("data-schedule-alerts")[1].split("</div>")[0]
    assert 'href="/schedules/"' in notice and 'data-schedule="nightly" data-health="late"' in notice
    assert 'data-schedule="tick" data-health="failing"' in notice and 'data-schedule="crm"' not in notice
    client.post("/schedules/nightly/pause/", data={"csrf_token": csrf_token(client, "/schedules/")})
    assert 'data-schedule="nightly"' not in client.get("/").get_data(as_text=True)  # paused: on purpose


def test_the_empty_page_says_where_declarations_come_from(app, client, monkeypatch):
    monkeypatch.setattr(declared_schedules, "_registry", {})
    html = client.get("/schedules/").get_data(as_text=True)
    empty = html.split("data-empty")[1].split("</div>")[0]
    assert "No schedule is declared" in empty and "JOB_HANDLER_MODULES" in empty
    assert "The web process and every worker import those modules at start" in empty
    assert "is empty in this web process" in empty  # the tests' app names no module
    declared_schedules.schedule("nightly", cron="0 6 * * *", type="reports.nightly")
    html = client.get("/schedules/").get_data(as_text=True)
    empty = html.split("data-empty")[1].split("</div>")[0]
    assert "No worker has recorded a schedule yet. This web process declares 1 (nightly)" in empty
