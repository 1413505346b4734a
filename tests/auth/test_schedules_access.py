"""The Schedules page and its actions with sign-in on: viewers read, operators act."""

from __future__ import annotations

from dashboard.store.flow.schedules import Declaration, sync
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import schedules as read_schedules
from tests.support.secured import form_token

TICK = Declaration("tick", "* * * * *", "UTC", "demo.success", {}, "default", 50, 3)
ACTIONS = ("pause", "resume", "run")


def test_anonymous_is_sent_to_sign_in_from_the_page_and_every_action(app, anonymous):
    sync([TICK])
    assert anonymous.get("/schedules/").headers["Location"].startswith("/login/?next=")
    for action in ACTIONS:
        response = anonymous.post(f"/schedules/tick/{action}/", data={"csrf_token": form_token(anonymous)})
        assert response.status_code == 303 and response.headers["Location"].startswith("/login/")
    assert not read_schedules.get_schedule("tick").paused


def test_a_viewer_reads_the_page_without_controls_and_is_refused_every_action(app, viewer):
    sync([TICK])
    html = viewer.get("/schedules/").get_data(as_text=True)
    assert 'data-schedule="tick"' in html and "data-action=" not in html
    token = form_token(viewer, "/schedules/")
    for action in ACTIONS:
        assert viewer.post(f"/schedules/tick/{action}/", data={"csrf_token": token}).status_code == 403
    assert (
        not read_schedules.get_schedule("tick").paused
        and read_schedules.get_schedule("tick", runs=5).runs == []
    )


def test_an_operator_pauses_and_runs_now_recorded_as_themselves(app, operator):
    sync([TICK])
    token = form_token(operator, "/schedules/")
    assert operator.post("/schedules/tick/pause/", data={"csrf_token": token}).status_code == 303
    assert read_schedules.get_schedule("tick").paused_by == "olga"
    assert operator.post("/schedules/tick/run/", data={"csrf_token": token}).status_code == 303
    [run] = read_schedules.get_schedule("tick", runs=5).runs
    [created] = read_jobs.job_events(run.id)
    assert created.data["actor"] == "olga" and created.data["source"] == "dashboard"
