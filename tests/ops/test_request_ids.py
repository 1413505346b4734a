"""Request ids: kept when sane, replaced otherwise, echoed, and recorded in the events written."""

from __future__ import annotations

import re

import pytest

from dashboard.store import read_jobs


def test_a_sane_id_is_kept_and_recorded_in_the_event(client):
    response = client.post(
        "/api/jobs/", json={"type": "demo.success"}, headers={"X-Request-ID": "deploy-7.a:1"}
    )
    assert response.status_code == 201
    assert response.headers["X-Request-ID"] == "deploy-7.a:1"
    (created,) = read_jobs.job_events(response.get_json()["id"])
    assert created.data["request_id"] == "deploy-7.a:1"
    assert created.data["actor"]  # beside the actor


@pytest.mark.parametrize("sent", [None, "", "a b", "x" * 129, "<script>", "é", "id\nX-Evil: 1"])
def test_anything_else_gets_a_fresh_id(client, sent):
    headers = {} if sent is None else {"X-Request-ID": sent}
    try:
        response = client.get("/api/health/", headers=headers)
    except ValueError:  # werkzeug's test client refuses a newline in a header itself
        return
    assert response.status_code == 200
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Request-ID"])


def test_every_page_gets_one(client):
    assert client.get("/").headers["X-Request-ID"]
