"""POST /api/jobs/ and /api/jobs/bulk/ with unique_key, unique_for, unique_while and debounce:
201 for the holder, 200 with it unchanged for a create it blocks, 400 naming the field."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from flask import Flask

from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs


def count(app: Flask) -> int:
    with app.app_context():
        return find_jobs.list_jobs(limit=100, offset=0).count


def test_a_live_key_returns_its_job_with_200_unchanged(client, job_type):
    body = {"type": job_type, "payload": {"v": 1}, "unique_key": "report:42", "unique_for": 3600}
    first = client.post("/api/jobs/", json=body)
    again = client.post("/api/jobs/", json={**body, "payload": {"v": 2}})
    assert (first.status_code, again.status_code) == (201, 200)
    job = first.get_json()
    assert again.get_json() == job and job["payload"] == {"v": 1}
    assert (job["unique_key"], job["unique_for"], job["unique_while"]) == ("report:42", 3600.0, "active")
    assert client.get(f"/api/jobs/{job['id']}/").get_json()["unique_key"] == "report:42"
    plain = client.post("/api/jobs/", json={"type": job_type}).get_json()
    assert (plain["unique_key"], plain["unique_for"], plain["unique_while"]) == (None, None, None)


def test_queued_scope_through_the_api(client, job_type):
    first = client.post("/api/jobs/", json={"type": job_type, "unique_key": "q", "unique_while": "queued"})
    assert first.status_code == 201 and first.get_json()["unique_while"] == "queued"
    assert client.post("/api/jobs/", json={"type": job_type, "unique_key": "q"}).status_code == 200


def test_debounce_through_the_api(app, client, job_type):
    before = datetime.now(UTC)
    body = {"type": job_type, "unique_key": "reindex:1", "debounce": 60}
    first = client.post("/api/jobs/", json={**body, "payload": {"v": 1}})
    second = client.post("/api/jobs/", json={**body, "payload": {"v": 2}})
    assert (first.status_code, second.status_code) == (201, 200)
    job = second.get_json()
    assert job["id"] == first.get_json()["id"] and job["payload"] == {"v": 2}
    assert datetime.fromisoformat(job["available_at"]) >= before + timedelta(seconds=60)
    events = client.get(f"/api/jobs/{job['id']}/events/").get_json()
    assert [event["type"] for event in events] == ["created", "debounced"]
    assert client.get("/api/job-events/?type=debounced").status_code == 200
    assert count(app) == 1


def test_concurrent_creates_give_one_201(app, job_type):
    threads = 8
    barrier = threading.Barrier(threads)
    codes: list[int] = []
    ids: set[str] = set()
    lock = threading.Lock()

    def run(n: int) -> None:
        with app.test_client() as client:
            barrier.wait()
            response = client.post(
                "/api/jobs/", json={"type": job_type, "unique_key": "race", "payload": {"n": n}}
            )
            with lock:
                codes.append(response.status_code)
                ids.add(response.get_json()["id"])

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert sorted(codes) == [200] * (threads - 1) + [201]
    assert len(ids) == 1 and count(app) == 1


def test_bulk_items_take_the_options(app, client, job_type):
    held = client.post("/api/jobs/", json={"type": job_type, "unique_key": "a"}).get_json()
    response = client.post(
        "/api/jobs/bulk/",
        json={
            "jobs": [
                {"type": job_type, "unique_key": "a"},
                {"type": job_type, "unique_key": "b", "unique_for": 10},
                {"type": job_type, "unique_key": "b"},
                {"type": job_type},
            ]
        },
    )
    assert response.status_code == 201
    results = response.get_json()["results"]
    assert [r["created"] for r in results] == [False, True, False, True]
    assert results[0]["job"]["id"] == held["id"]
    assert results[2]["job"]["id"] == results[1]["job"]["id"]
    assert results[1]["job"]["unique_for"] == 10.0
    with app.app_context():
        stored = read_jobs.get_job(results[1]["job"]["id"])
    assert stored is not None and stored.unique_key == "b"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"unique_key": ""}, "unique_key"),
        ({"unique_key": "k" * 256}, "unique_key"),
        ({"unique_key": "k", "unique_for": -1}, "unique_for"),
        ({"unique_key": "k", "unique_for": 0}, "unique_for"),
        ({"unique_key": "k", "unique_for": "60"}, "unique_for"),
        ({"unique_key": "k", "unique_for": True}, "unique_for"),
        ({"unique_key": "k", "unique_for": 1e300}, "unique_for"),
        ({"unique_key": "k", "unique_while": "running"}, "unique_while"),
        ({"unique_key": "k", "debounce": -5}, "debounce"),
        ({"unique_key": "k", "debounce": "soon"}, "debounce"),
        ({"debounce": 5}, "debounce"),
        ({"unique_for": 5}, "unique_for"),
        ({"unique_key": "k", "debounce": 5, "available_at": "2030-01-01T00:00:00Z"}, "debounce"),
        ({"unique_key": "k", "debounce": 5, "unique_while": "active"}, "debounce"),
    ],
)
def test_bad_options_are_400_naming_the_field_and_create_nothing(app, client, job_type, body, field):
    response = client.post("/api/jobs/", json={"type": job_type, **body})
    assert response.status_code == 400, response.get_json()
    assert field in response.get_json()["errors"]
    bulk = client.post("/api/jobs/bulk/", json={"jobs": [{"type": job_type}, {"type": job_type, **body}]})
    assert bulk.status_code == 400
    assert f"jobs.1.{field}" in bulk.get_json()["errors"]
    assert count(app) == 0
