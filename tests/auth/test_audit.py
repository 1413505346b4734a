"""Every operator action records who did it and through which door, and the timeline shows it."""

from __future__ import annotations

from dashboard.store.reads import jobs as read_jobs
from tests.support.factories import make_job
from tests.support.secured import OPERATOR_TOKEN, bearer, form_token


def created_event(job_id):
    [event] = [e for e in read_jobs.job_events(job_id) if e.type == "created"]
    return event


def without_request_id(data: dict) -> dict:
    """The audit fields; every event a request writes also carries its id (it ties the event to
    the request's log lines)."""
    assert len(data["request_id"]) == 32
    return {k: v for k, v in data.items() if k != "request_id"}


def test_api_create_bulk_and_retry_record_the_token_name(app, secured_app):
    client = secured_app.test_client()
    audit = {"source": "api", "actor": "deploy", "role": "operator", "credential": "token"}
    one = client.post("/api/jobs/", json={"type": "demo.success"}, headers=bearer(OPERATOR_TOKEN)).get_json()
    assert without_request_id(created_event(one["id"]).data) == {**audit, "type": "demo.success"}
    bulk = client.post(
        "/api/jobs/bulk/", json={"jobs": [{"type": "demo.fail"}]}, headers=bearer(OPERATOR_TOKEN)
    ).get_json()
    assert without_request_id(created_event(bulk["results"][0]["job"]["id"]).data) == {
        **audit,
        "type": "demo.fail",
    }
    failed = make_job("failed")
    assert client.post(f"/api/jobs/{failed.id}/retry/", headers=bearer(OPERATOR_TOKEN)).status_code == 200
    [manual] = [e for e in read_jobs.job_events(failed.id) if e.type == "manual_retry"]
    assert without_request_id(manual.data) == audit


def test_dashboard_retry_and_create_record_the_user_and_the_timeline_shows_them(app, operator):
    failed = make_job("failed")
    token = form_token(operator, "/jobs/")
    operator.post(f"/jobs/{failed.id}/retry/", data={"csrf_token": token})
    [manual] = [e for e in read_jobs.job_events(failed.id) if e.type == "manual_retry"]
    assert without_request_id(manual.data) == {
        "source": "dashboard",
        "actor": "olga",
        "role": "operator",
        "credential": "password",
    }
    html = operator.get(f"/jobs/{failed.id}/").get_data(as_text=True)
    assert 'data-field="actor">by <strong>olga</strong> (operator) via dashboard' in html

    fields = {"type": "demo.success", "payload": "{}", "priority": "50", "max_attempts": "3"}
    created = operator.post("/jobs/new/", data={"csrf_token": token, **fields})
    job_id = created.headers["Location"].split("/")[2]
    assert created_event(job_id).data["actor"] == "olga"


def test_with_sign_in_off_the_actor_is_anonymous(app, client):
    failed = make_job("failed")
    html = client.get(f"/jobs/{failed.id}/").get_data(as_text=True)
    token = html.split('"X-CSRFToken": "', 1)[1].split('"', 1)[0]
    client.post(f"/jobs/{failed.id}/retry/", data={"csrf_token": token})
    [manual] = [e for e in read_jobs.job_events(failed.id) if e.type == "manual_retry"]
    assert without_request_id(manual.data) == {
        "source": "dashboard",
        "actor": "anonymous",
        "role": None,
        "credential": "none",
    }
    html = client.get(f"/jobs/{failed.id}/").get_data(as_text=True)
    assert "by <strong>anonymous</strong> via dashboard" in html
