"""The JSON API's names and keys: queues named only with dots, idempotency keys with control
or bidi characters, `available_at` at the edges of time (each a 400 naming the field, nothing
written); a queue list that says when it is cut short and never hides a paused queue; schedule
pause and resume in the audit log."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.flow import queues
from dashboard.store.flow.schedules import Declaration, sync
from dashboard.store.reads import queues as read_queues

from .helpers import table_snapshot

DOT_NAMES = [".", "..", "..."]


@pytest.mark.parametrize("name", DOT_NAMES)
def test_a_queue_named_only_with_dots_is_a_400_on_queue_in_every_create(client, job_type, name):
    before = table_snapshot()
    one = client.post("/api/jobs/", json={"type": job_type, "queue": name})
    assert one.status_code == 400 and "only of dots" in one.get_json()["errors"]["queue"][0]
    bulk = client.post(
        "/api/jobs/bulk/", json={"jobs": [{"type": job_type}, {"type": job_type, "queue": name}]}
    )
    assert bulk.status_code == 400 and "jobs.1.queue" in bulk.get_json()["errors"]
    assert client.get(f"/api/jobs/?queue={name}").status_code == 400
    assert table_snapshot() == before


@pytest.mark.parametrize("name", ["%2E", "%2E%2E", "...", "..", "."])
def test_a_queue_path_named_only_with_dots_is_a_400_on_name_and_creates_nothing(client, name):
    for method, path in [
        (client.get, f"/api/queues/{name}/"),
        (client.post, f"/api/queues/{name}/pause/"),
        (client.post, f"/api/queues/{name}/resume/"),
    ]:
        response = method(path)
        assert response.status_code == 400, (path, response.status_code)
        assert "only of dots" in response.get_json()["errors"]["name"][0]
    patched = client.patch(f"/api/queues/{name}/", json={"concurrency_limit": 2})
    assert patched.status_code == 400 and "name" in patched.get_json()["errors"]
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM jobs_queue")).scalar_one() == 0
        assert conn.execute(text("SELECT count(*) FROM jobs_audit")).scalar_one() == 0


def test_the_published_queue_pattern_refuses_dots_only(client):
    import re

    document = client.get("/api/schema/").get_json()
    pattern = document["components"]["schemas"]["CreateJob"]["properties"]["queue"]["anyOf"][0]["pattern"]
    assert not re.search(pattern, "..") and not re.search(pattern, ".")
    assert re.search(pattern, "a.b") and re.search(pattern, ".mail")


BAD_KEYS = [
    "a\u0001b",
    "k\x7f",
    "k\x85",
    "\u200ek",
    "k\u200f",
    "\u202ak",
    "k\u202e",
    "\u2066k\u2069",
    "k\u2028",
]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_an_idempotency_key_with_control_or_bidi_characters_is_a_400(client, job_type, key):
    before = table_snapshot()
    response = client.post("/api/jobs/", json={"type": job_type, "idempotency_key": key})
    assert response.status_code == 400
    [message] = response.get_json()["errors"]["idempotency_key"]
    assert "control or invisible formatting characters" in message and "U+" in message
    bulk = client.post("/api/jobs/bulk/", json={"jobs": [{"type": job_type, "idempotency_key": key}]})
    assert bulk.status_code == 400 and "jobs.0.idempotency_key" in bulk.get_json()["errors"]
    assert table_snapshot() == before


def test_a_visible_idempotency_key_is_kept_as_sent(client, job_type):
    response = client.post("/api/jobs/", json={"type": job_type, "idempotency_key": "commande-été #7 ✓"})
    assert response.status_code == 201 and response.get_json()["idempotency_key"] == "commande-été #7 ✓"


@pytest.mark.parametrize(
    "moment",
    [
        "9999-12-31T23:59:59Z",
        "9999-12-31T23:59:59-14:00",
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00+14:00",
        "1899-12-31T23:59:59Z",
        "10000-01-01T00:00:00Z",
        "0000-01-01T00:00:00Z",
    ],
)
def test_available_at_at_the_edges_of_time_is_a_400_on_available_at(client, job_type, moment):
    before = table_snapshot()
    response = client.post("/api/jobs/", json={"type": job_type, "available_at": moment})
    assert response.status_code == 400 and "available_at" in response.get_json()["errors"]
    bulk = client.post("/api/jobs/bulk/", json={"jobs": [{"type": job_type, "available_at": moment}]})
    assert bulk.status_code == 400 and "jobs.0.available_at" in bulk.get_json()["errors"]
    assert table_snapshot() == before


@pytest.mark.parametrize("moment", ["1900-01-01T00:00:00+14:00", "9998-12-31T23:59:59.999999-14:00"])
def test_available_at_at_the_edges_of_the_years_is_stored_and_read_back(client, job_type, moment):
    created = client.post("/api/jobs/", json={"type": job_type, "available_at": moment})
    assert created.status_code == 201, created.get_json()
    job_id = created.get_json()["id"]
    assert client.get(f"/api/jobs/{job_id}/").status_code == 200
    assert client.get("/api/jobs/").status_code == 200


def many_queues(names: list[str], paused: list[str]) -> None:
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs_queue (name, created_at, paused) "
                "SELECT n, now(), n = ANY(:paused) FROM unnest(CAST(:names AS text[])) AS n"
            ),
            {"names": names, "paused": paused},
        )


def test_the_queue_list_says_when_it_is_cut_short_and_keeps_every_paused_queue(client, monkeypatch):
    monkeypatch.setattr(read_queues, "QUEUES_SHOWN", 3)
    many_queues(["a", "b", "c", "d", "zz-paused"], paused=["zz-paused"])
    body = client.get("/api/queues/").get_json()
    assert [q["name"] for q in body["results"]] == ["a", "b", "zz-paused"]  # by name, the paused one kept
    assert body["truncated"] is True and body["total"] == 5
    monkeypatch.setattr(read_queues, "QUEUES_SHOWN", 500)
    whole = client.get("/api/queues/").get_json()
    assert len(whole["results"]) == 5 and whole["truncated"] is False and whole["total"] == 5


def test_the_queue_list_keeps_its_shape_and_adds_only_the_two_fields(client):
    assert client.get("/api/queues/").get_json() == {"results": [], "truncated": False, "total": 0}
    queues.pause("mail")
    body = client.get("/api/queues/").get_json()
    assert set(body) == {"results", "truncated", "total"} and body["results"][0]["name"] == "mail"


def test_five_hundred_queues_are_listed_past_them_the_paused_ones_first(client):
    names = [f"q{n:04d}" for n in range(600)]
    many_queues(names, paused=["q0599", "q0550"])
    body = client.get("/api/queues/").get_json()
    listed = [q["name"] for q in body["results"]]
    assert len(listed) == 500 and body["truncated"] is True and body["total"] == 600
    assert listed == sorted(listed) and {"q0599", "q0550"} <= set(listed)
    assert listed[:498] == names[:498]


TICK = Declaration("tick", "* * * * *", "UTC", "demo.success", {}, "default", 50, 3)


def audit_rows() -> list[dict]:
    with db.engine.connect() as conn:
        return [
            dict(row)
            for row in conn.execute(text("SELECT action, actor, data FROM jobs_audit ORDER BY id")).mappings()
        ]


def test_schedule_pause_and_resume_write_their_audit_rows(client):
    sync([TICK])
    assert client.post("/api/schedules/tick/pause/").status_code == 200
    assert client.post("/api/schedules/tick/pause/").status_code == 200  # twice: no second row
    assert client.post("/api/schedules/tick/resume/").status_code == 200
    assert client.post("/api/schedules/tick/resume/").status_code == 200
    rows = audit_rows()
    assert [row["action"] for row in rows] == ["schedule_paused", "schedule_resumed"]
    assert all(row["actor"] == "anonymous" and row["data"]["schedule"] == "tick" for row in rows)
    assert rows[0]["data"]["source"] == "api"
