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
    # Through the WSGI environ: werkzeug's test client would refuse a newline in a header itself.
    environ = {} if sent is None else {"HTTP_X_REQUEST_ID": sent}
    response = client.get("/api/health/", environ_overrides=environ)
    assert response.status_code == 200
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Request-ID"])


def test_every_page_gets_one(client):
    assert client.get("/").headers["X-Request-ID"]
