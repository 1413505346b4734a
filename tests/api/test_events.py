"""Per-job events (ascending) and the global feed (cursor pages, newest first)."""

from __future__ import annotations

import base64
import uuid
from urllib.parse import parse_qs, urlsplit

import pytest

from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue

from .helpers import EVENT_FIELDS, create


def claim_and_fail(job_id: uuid.UUID) -> None:
    job = lifecycle.claim_next_job("w:1:thread-1:abcd", lease_seconds=30)
    assert job is not None and job.id == job_id
    lifecycle.fail_job(
        job.id, "w:1:thread-1:abcd", job.attempts, "boom", backoff_base_seconds=5, backoff_max_seconds=300
    )


def cursor_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["cursor"][0]


def test_job_events_are_ascending_by_id_in_the_reference_shape(client, job_type):
    job = create(client, job_type, max_attempts=1)
    claim_and_fail(uuid.UUID(job["id"]))
    response = client.get(f"/api/jobs/{job['id']}/events/")
    assert response.status_code == 200
    events = response.get_json()
    assert [e["type"] for e in events] == ["created", "claimed", "failed"]
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)
    assert list(events[0]) == EVENT_FIELDS
    assert {e["job"] for e in events} == {job["id"]}
    assert events[0]["message"] == "Job created" and events[0]["worker_id"] is None
    assert events[2]["worker_id"] == "w:1:thread-1:abcd" and events[2]["attempt"] == 1
    assert events[2]["data"]["error"] == "boom"


def test_events_of_unknown_or_malformed_job_are_404(client):
    assert client.get(f"/api/jobs/{uuid.uuid4()}/events/").get_json() == {"detail": "Not found."}
    assert client.get("/api/jobs/nope/events/").status_code == 404


def test_feed_is_newest_first_with_default_page_of_50(client):
    for i in range(30):
        enqueue.create_job(enqueue.JobSpec("demo.success", payload={"i": i}))
        enqueue.create_job(enqueue.JobSpec("demo.success"))
    page = client.get("/api/job-events/").get_json()
    assert list(page) == ["next", "previous", "results"]
    assert [e["id"] for e in page["results"]] == list(range(60, 10, -1))
    assert list(page["results"][0]) == EVENT_FIELDS
    assert page["previous"] is None
    assert page["next"].startswith("http://localhost/api/job-events/?")
    rest = client.get(page["next"]).get_json()
    assert [e["id"] for e in rest["results"]] == list(range(10, 0, -1))
    assert rest["next"] is None


def test_feed_limit_above_200_is_reduced_to_200(client):
    for _ in range(201):
        enqueue.create_job(enqueue.JobSpec("demo.success"))
    page = client.get("/api/job-events/?limit=1000").get_json()
    assert len(page["results"]) == 200
    assert parse_qs(urlsplit(page["next"]).query)["limit"] == ["200"]


def test_walking_next_while_events_arrive_visits_each_older_event_exactly_once(client, job_type):
    for _ in range(10):
        create(client, job_type)
    seen: list[int] = []
    url = "/api/job-events/?limit=3"
    while url:
        page = client.get(url).get_json()
        seen.extend(e["id"] for e in page["results"])
        create(client, job_type)  # a new event between every two pages
        url = page["next"]
    assert seen == list(range(10, 0, -1))


def test_previous_leads_back_to_newer_events(client):
    for _ in range(7):
        enqueue.create_job(enqueue.JobSpec("demo.success"))
    first = client.get("/api/job-events/?limit=3").get_json()
    second = client.get(first["next"]).get_json()
    assert [e["id"] for e in second["results"]] == [4, 3, 2]
    back = client.get(second["previous"]).get_json()
    assert [e["id"] for e in back["results"]] == [7, 6, 5]
    assert back["previous"] is None  # nothing newer yet
    enqueue.create_job(enqueue.JobSpec("demo.success"))
    newer = client.get(client.get(second["previous"]).get_json()["next"]).get_json()
    assert [e["id"] for e in newer["results"]] == [4, 3, 2]


def test_feed_filters_by_type_and_job_id_and_keeps_them_in_links(client, job_type):
    a = create(client, job_type, max_attempts=1)
    b = create(client, job_type)
    claim_and_fail(uuid.UUID(a["id"]))
    failed = client.get("/api/job-events/?type=failed").get_json()["results"]
    assert [(e["type"], e["job"]) for e in failed] == [("failed", a["id"])]
    mine = client.get(f"/api/job-events/?job_id={b['id']}").get_json()["results"]
    assert [(e["type"], e["job"]) for e in mine] == [("created", b["id"])]
    page = client.get(f"/api/job-events/?job_id={a['id']}&limit=1").get_json()
    assert parse_qs(urlsplit(page["next"]).query)["job_id"] == [a["id"]]
    assert client.get(page["next"]).get_json()["results"][0]["type"] == "claimed"
    assert client.get(f"/api/job-events/?job_id={uuid.uuid4()}").get_json()["results"] == []


def test_feed_takes_several_types_and_exclusions_and_keeps_them_in_links(client, job_type):
    """Extensions to the reference: `type` repeated (any of them) and `exclude` (comma-separated
    or repeated); the reference's single `type` still works, and `next` / `previous` carry all."""
    a = create(client, job_type, max_attempts=1)
    create(client, job_type)
    claim_and_fail(uuid.UUID(a["id"]))  # events: created a, created b, claimed a, failed a

    def types(url: str) -> list[str]:
        return [e["type"] for e in client.get(url).get_json()["results"]]

    assert types("/api/job-events/?type=failed") == ["failed"]
    assert types("/api/job-events/?type=failed&type=claimed") == ["failed", "claimed"]
    assert types("/api/job-events/?type=failed&type=&type=claimed") == ["failed", "claimed"]
    assert types("/api/job-events/?exclude=created") == ["failed", "claimed"]
    assert types("/api/job-events/?exclude=created,failed") == ["claimed"]
    assert types("/api/job-events/?exclude=created&exclude=failed") == ["claimed"]
    assert types("/api/job-events/?type=created&type=failed&exclude=failed") == ["created", "created"]

    page = client.get(
        "/api/job-events/?type=created&type=failed&exclude=progress,lease_renewed&limit=1"
    ).get_json()
    assert [e["type"] for e in page["results"]] == ["failed"]
    query = parse_qs(urlsplit(page["next"]).query)
    assert query["type"] == ["created", "failed"] and query["exclude"] == ["progress,lease_renewed"]
    older = client.get(page["next"]).get_json()
    assert [e["type"] for e in older["results"]] == ["created"]
    back = parse_qs(urlsplit(older["previous"]).query)
    assert back["type"] == ["created", "failed"] and back["exclude"] == ["progress,lease_renewed"]
    assert [e["type"] for e in client.get(older["previous"]).get_json()["results"]] == ["failed"]


@pytest.mark.parametrize(
    "params",
    ["type=failed&type=exploded", "exclude=progress,exploded", "exclude=,", "exclude=progress&exclude=nope"],
)
def test_invalid_type_lists_name_the_parameter(client, params):
    response = client.get(f"/api/job-events/?{params}")
    if params == "exclude=,":  # no name at all: no filter, as an empty value
        assert response.status_code == 200
        return
    assert response.status_code == 400
    field = params.split("=", 1)[0]
    assert list(response.get_json()["errors"]) == [field]


def test_cursors_are_opaque_and_round_trip(client):
    for _ in range(3):
        enqueue.create_job(enqueue.JobSpec("demo.success"))
    page = client.get("/api/job-events/?limit=1").get_json()
    token = cursor_of(page["next"])
    assert not token.isdigit()
    assert client.get(f"/api/job-events/?limit=1&cursor={token}").get_json()["results"][0]["id"] == 2


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage",
        "!!!!",
        "%00",
        _b64(b"b:-1"),
        _b64(b"x:5"),
        _b64(b"b:5;DROP TABLE jobs_job"),
        _b64(b"b:99999999999999999999"),
        _b64(b"b:007"),
        _b64(b"\xff\xfe"),
        "A" * 500,
    ],
)
def test_garbage_cursor_gets_400(client, cursor):
    response = client.get(f"/api/job-events/?cursor={cursor}")
    assert response.status_code == 400
    assert response.get_json() == {"detail": "Invalid input.", "errors": {"cursor": ["Invalid cursor."]}}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ("type=exploded", "type"),
        ("job_id=42", "job_id"),
        ("job_id=' OR 1=1 --", "job_id"),
        ("limit=0", "limit"),
        ("limit=-5", "limit"),
        ("limit=ten", "limit"),
    ],
)
def test_invalid_feed_parameters_get_400(client, params, field):
    response = client.get(f"/api/job-events/?{params}")
    assert response.status_code == 400
    assert list(response.get_json()["errors"]) == [field]
