"""GET /api/jobs/ (limit-offset, filters), GET /api/jobs/{id}/, timestamps in TIME_ZONE."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from dashboard.store.lifecycle import create as enqueue
from tests.support.factories import make_job

from .helpers import JOB_FIELDS, another_app

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def make_jobs(n: int, job_type: str = "demo.success") -> list[uuid.UUID]:
    """``n`` jobs, oldest first (one second apart)."""
    return [
        enqueue.create_job(enqueue.JobSpec(job_type), now=T0 + timedelta(seconds=i)).job.id for i in range(n)
    ]


def query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def test_empty_list(client):
    assert client.get("/api/jobs/").get_json() == {"count": 0, "next": None, "previous": None, "results": []}


def test_default_page_is_25_newest_first_with_absolute_next(client):
    ids = make_jobs(30)
    page = client.get("/api/jobs/").get_json()
    assert page["count"] == 30
    assert [j["id"] for j in page["results"]] == [str(i) for i in ids[::-1][:25]]
    assert list(page["results"][0]) == JOB_FIELDS
    assert page["previous"] is None
    assert page["next"].startswith("http://localhost/api/jobs/?")
    assert query(page["next"]) == {"limit": ["25"], "offset": ["25"]}
    last = client.get(page["next"]).get_json()
    assert [j["id"] for j in last["results"]] == [str(i) for i in ids[::-1][25:]]
    assert last["next"] is None
    assert query(last["previous"]) == {"limit": ["25"]}  # back to the first page, as DRF does


def test_limit_offset_walk_and_previous_links(client):
    ids = make_jobs(7)
    page = client.get("/api/jobs/?limit=3&offset=3").get_json()
    assert [j["id"] for j in page["results"]] == [str(i) for i in ids[::-1][3:6]]
    assert query(page["next"]) == {"limit": ["3"], "offset": ["6"]}
    assert query(page["previous"]) == {"limit": ["3"]}
    page = client.get("/api/jobs/?limit=3&offset=5").get_json()
    assert query(page["previous"]) == {"limit": ["3"], "offset": ["2"]}
    assert client.get("/api/jobs/?limit=3&offset=100").get_json()["results"] == []


def test_limit_above_100_is_reduced_to_100(client):
    make_jobs(101)
    page = client.get("/api/jobs/?limit=500").get_json()
    assert len(page["results"]) == 100
    assert query(page["next"]) == {"limit": ["100"], "offset": ["100"]}


def test_filters_status_exact_type_substring_case_insensitive_and_kept_in_links(client):
    make_jobs(3, "Demo.Success")
    make_jobs(2, "mail.send")
    make_job("failed", type="demo.fail")
    page = client.get("/api/jobs/?type=DEMO&status=queued&limit=2").get_json()
    assert page["count"] == 3
    assert {j["type"] for j in page["results"]} == {"Demo.Success"}
    assert query(page["next"]) == {"type": ["DEMO"], "status": ["queued"], "limit": ["2"], "offset": ["2"]}
    assert client.get("/api/jobs/?status=failed").get_json()["count"] == 1
    assert client.get("/api/jobs/?type=%25").get_json()["count"] == 0  # LIKE wildcards are literal


def test_empty_parameters_count_as_absent(client):
    make_jobs(2)
    assert client.get("/api/jobs/?status=&type=&limit=&offset=").get_json()["count"] == 2


def test_unknown_parameters_are_ignored_and_not_carried_into_links(client):
    make_jobs(2)
    page = client.get("/api/jobs/?limit=1&_external=x&format=json").get_json()
    assert page["count"] == 2
    assert query(page["next"]) == {"limit": ["1"], "offset": ["1"]}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ("status=done", "status"),
        ("status=QUEUED", "status"),
        ("type=" + "x" * 121, "type"),
        ("limit=0", "limit"),
        ("limit=-1", "limit"),
        ("limit=abc", "limit"),
        ("limit=2.5", "limit"),
        ("offset=-1", "offset"),
        ("offset=x", "offset"),
        (f"offset={2**63}", "offset"),
        ("type=a%00b", "type"),
    ],
)
def test_invalid_list_parameters_get_400(client, params, field):
    response = client.get(f"/api/jobs/?{params}")
    assert response.status_code == 400
    body = response.get_json()
    assert body["detail"] == "Invalid input."
    assert list(body["errors"]) == [field]


def test_detail_has_the_list_item_shape(client):
    job = make_job("running")
    listed = client.get("/api/jobs/").get_json()["results"][0]
    detail = client.get(f"/api/jobs/{job.id}/")
    assert detail.status_code == 200
    assert detail.get_json() == listed
    assert listed["status"] == "running"
    assert listed["locked_by"] == job.locked_by
    assert datetime.fromisoformat(listed["locked_until"]) == job.locked_until


def test_detail_of_unknown_or_malformed_ids_is_404(client):
    assert client.get(f"/api/jobs/{uuid.uuid4()}/").status_code == 404
    for bad in ["not-a-uuid", "1", "00000000-0000-0000-0000-00000000000g", "%00"]:
        response = client.get(f"/api/jobs/{bad}/")
        assert response.status_code == 404
        assert response.get_json() == {"detail": "Not found."}


def test_timestamps_are_iso_8601_with_the_offset_of_time_zone(app, database_url):
    with another_app(DATABASE_URL=database_url, TIME_ZONE="Asia/Tehran") as other, other.app_context():
        job = make_job("succeeded", now=T0)
        body = other.test_client().get(f"/api/jobs/{job.id}/").get_json()
    assert body["created_at"] == "2026-06-01T15:30:00+03:30"
    assert body["finished_at"] == "2026-06-01T15:30:00+03:30"
    assert datetime.fromisoformat(body["available_at"]) == T0


def test_utc_timestamps_carry_an_explicit_offset(client):
    job = make_job("queued", now=T0)
    assert client.get(f"/api/jobs/{job.id}/").get_json()["created_at"] == "2026-06-01T12:00:00+00:00"
