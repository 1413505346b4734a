"""Request ids: kept when sane, replaced otherwise, echoed, and recorded in the events written."""

from __future__ import annotations

import re

import pytest

from dashboard.store.reads import jobs as read_jobs

FRESH_ID = re.compile(r"[0-9a-f]{32}")  # 128 random bits as hex: secrets.token_hex(16)


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
    assert FRESH_ID.fullmatch(response.headers["X-Request-ID"])


def test_every_page_gets_a_fresh_id_of_its_own(client):
    ids = [client.get(path).headers["X-Request-ID"] for path in ("/", "/", "/jobs/", "/api/health/")]
    assert all(FRESH_ID.fullmatch(rid) for rid in ids), ids
    assert len(set(ids)) == len(ids), f"a request id was reused: {ids}"


def test_two_requests_get_different_ids_and_each_event_records_its_own(client):
    answers = [client.post("/api/jobs/", json={"type": "demo.success"}) for _ in range(2)]
    assert [a.status_code for a in answers] == [201, 201]
    ids = [a.headers["X-Request-ID"] for a in answers]
    assert all(FRESH_ID.fullmatch(rid) for rid in ids), ids
    assert ids[0] != ids[1]
    recorded = [read_jobs.job_events(a.get_json()["id"])[0].data["request_id"] for a in answers]
    assert recorded == ids
