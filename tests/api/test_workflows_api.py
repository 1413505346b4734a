"""Workflows through the API: `depends_on`, `on_parent_failure` and `workflow` on create (one job
and a bulk graph), the job JSON's workflow fields, and `/api/workflows/{workflow}/` with its
cancel and retry (dry runs, roles, the actor in each event)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from dashboard.config.rules import PARENT_FAILURE_POLICIES, PARENTS_MAX
from dashboard.store import lifecycle
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import workflows as read_workflows
from tests.support.factories import make_job
from tests.support.open_access import ANONYMOUS_API, audit
from tests.support.secured import OPERATOR_TOKEN, VIEWER_TOKEN, build

from .helpers import JOB_FIELDS, create, table_snapshot

WAITING = "9999-12-31T00:00:00+00:00"


def bulk(client, *jobs: dict[str, Any]):
    return client.post("/api/jobs/bulk/", json={"jobs": list(jobs)})


def run(job_id: str, *, ok: bool = True) -> None:
    """Claim the only due job, which must be ``job_id``, and settle it."""
    claimed = lifecycle.claim_next_job("w1", lease_seconds=30)
    assert claimed is not None and str(claimed.id) == job_id
    if ok:
        assert lifecycle.complete_job(claimed.id, "w1", claimed.attempts, {"from": job_id})
    else:
        lifecycle.fail_job(
            claimed.id, "w1", claimed.attempts, "boom", backoff_base_seconds=1, backoff_max_seconds=1
        )


def test_a_job_with_parents_waits_and_every_job_json_says_so(client, job_type):
    parent = create(client, job_type, workflow="nightly")
    child = create(client, job_type, depends_on=[parent["id"]], payload={"n": 1})
    assert list(child) == JOB_FIELDS
    assert (child["status"], child["available_at"]) == ("queued", WAITING)
    assert (child["depends_on"], child["on_parent_failure"]) == ([parent["id"]], "cancel")
    assert (child["workflow"], child["waiting_on"]) == ("nightly", 1)
    assert (parent["depends_on"], parent["on_parent_failure"], parent["waiting_on"]) == ([], None, 0)
    assert client.get(f"/api/jobs/{child['id']}/").get_json() == child
    listed = {job["id"]: job for job in client.get("/api/jobs/").get_json()["results"]}
    assert listed[child["id"]] == child
    run(parent["id"])
    released = client.get(f"/api/jobs/{child['id']}/").get_json()
    assert (released["waiting_on"], released["status"]) == (0, "queued")
    assert released["available_at"] != WAITING
    events = client.get(f"/api/jobs/{child['id']}/events/").get_json()
    assert [e["type"] for e in events] == ["created", "released"]
    assert audit(events[0]["data"]) == {**ANONYMOUS_API, "type": job_type, "depends_on": [parent["id"]]}


def test_a_job_without_a_workflow_joins_its_first_parents(client, job_type):
    first, second = create(client, job_type), create(client, job_type)
    child = create(client, job_type, depends_on=[first["id"], second["id"]], on_parent_failure="run")
    assert (child["workflow"], child["on_parent_failure"], child["waiting_on"]) == (first["id"], "run", 2)
    assert client.get(f"/api/jobs/{first['id']}/").get_json()["workflow"] == first["id"]
    assert client.get(f"/api/jobs/{second['id']}/").get_json()["workflow"] is None


def test_a_failed_parent_cancels_a_new_child_at_birth(client, job_type):
    failed = make_job("failed")
    child = create(client, job_type, depends_on=[str(failed.id)])
    assert (child["status"], child["last_error"]) == ("failed", f"Cancelled: parent {failed.id} failed")
    waits = create(client, job_type, depends_on=[str(failed.id)], on_parent_failure="wait")
    assert (waits["status"], waits["waiting_on"], waits["available_at"]) == ("queued", 1, WAITING)


def test_bulk_creates_a_whole_graph_naming_earlier_jobs_by_index(client, job_type):
    outside = create(client, job_type)
    response = bulk(
        client,
        {"type": job_type, "payload": {"step": "fetch"}},
        {"type": job_type, "depends_on": [0]},
        {"type": job_type, "depends_on": [0, outside["id"]]},
        {"type": job_type, "depends_on": [1, 2], "on_parent_failure": "run", "workflow": "etl-2"},
        {"type": job_type, "workflow": "loose"},
    )
    assert response.status_code == 201, response.get_json()
    jobs = [result["job"] for result in response.get_json()["results"]]
    assert all(list(job) == JOB_FIELDS for job in jobs)
    ids = [job["id"] for job in jobs]
    assert [job["depends_on"] for job in jobs] == [
        [],
        [ids[0]],
        [ids[0], outside["id"]],
        [ids[1], ids[2]],
        [],
    ]
    assert [job["waiting_on"] for job in jobs] == [0, 1, 2, 2, 0]
    assert [job["on_parent_failure"] for job in jobs] == [None, "cancel", "cancel", "run", None]
    # the first job starts the workflow its dependents join, named by its id, and says so
    assert [job["workflow"] for job in jobs] == [ids[0], ids[0], ids[0], "etl-2", "loose"]
    for job in jobs:
        assert client.get(f"/api/jobs/{job['id']}/").get_json() == job


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"depends_on": "not-a-list"}, "depends_on"),
        ({"depends_on": ["not-an-id"]}, "depends_on.0"),
        ({"depends_on": [0]}, "depends_on.0"),  # an index means nothing outside a bulk create
        ({"depends_on": [str(uuid.UUID(int=n)) for n in range(PARENTS_MAX + 1)]}, "depends_on"),
        ({"depends_on": [str(uuid.UUID(int=1))] * 2}, "depends_on"),
        ({"depends_on": [str(uuid.UUID(int=1))], "on_parent_failure": "maybe"}, "on_parent_failure"),
        ({"on_parent_failure": "run"}, "on_parent_failure"),
        ({"depends_on": [], "on_parent_failure": "run"}, "on_parent_failure"),
        ({"workflow": ""}, "workflow"),
        ({"workflow": "w" * 121}, "workflow"),
        ({"workflow": "a\u0000b"}, "workflow"),
        ({"workflow": "a\u202eb"}, "workflow"),
        ({"workflow": 7}, "workflow"),
    ],
)
def test_bad_workflow_fields_are_a_400_naming_the_field_and_create_nothing(client, job_type, body, field):
    parent = create(client, job_type)
    before = table_snapshot()
    response = client.post("/api/jobs/", json={"type": job_type, **body})
    assert response.status_code == 400, response.get_json()
    assert field in response.get_json()["errors"], response.get_json()
    if body.get("depends_on") != [0]:  # in a bulk create, an index of an earlier job
        response = bulk(client, {"type": job_type, "depends_on": [parent["id"]]}, {"type": job_type, **body})
        assert response.status_code == 400
        assert f"jobs.1.{field}" in response.get_json()["errors"], response.get_json()
    assert table_snapshot() == before


@pytest.mark.parametrize(
    ("parents", "message"),
    [([1], "1 is not the index of an earlier job."), ([2], "2 is not the index of an earlier job.")],
)
def test_a_bulk_index_must_name_an_earlier_job(client, job_type, parents, message):
    before = table_snapshot()
    response = bulk(client, {"type": job_type}, {"type": job_type, "depends_on": parents}, {"type": job_type})
    assert response.status_code == 400
    assert response.get_json()["errors"] == {"jobs.1.depends_on": [message]}
    assert table_snapshot() == before
    for wrong in ([True], ["0"], [-1], [1000], [0.5], [None], [[0]]):
        response = bulk(client, {"type": job_type}, {"type": job_type, "depends_on": wrong})
        assert response.status_code == 400
        assert list(response.get_json()["errors"]) == ["jobs.1.depends_on.0"], wrong
    assert table_snapshot() == before
    response = bulk(client, {"type": job_type}, {"type": job_type, "depends_on": [0.0]})
    assert response.status_code == 201  # 0.0 is the integer 0 in JSON
    assert table_snapshot()["jobs"] != before["jobs"]


def test_an_unknown_parent_is_a_400_naming_it_and_nothing_is_created(client, job_type):
    known = create(client, job_type)
    missing = uuid.uuid4()
    before = table_snapshot()
    response = client.post("/api/jobs/", json={"type": job_type, "depends_on": [known["id"], str(missing)]})
    assert response.status_code == 400
    assert response.get_json()["errors"] == {"depends_on": [f"No job {missing}."]}
    response = bulk(
        client,
        {"type": job_type, "idempotency_key": "first"},
        {"type": job_type, "depends_on": [0]},
        {"type": job_type, "depends_on": [1, str(missing)]},
    )
    assert response.status_code == 400
    assert response.get_json()["errors"] == {"jobs.2.depends_on": [f"No job {missing}."]}
    assert table_snapshot() == before  # the jobs created before the refused one are rolled back


def graph(client, job_type: str, name: str = "report-2026") -> list[dict[str, Any]]:
    """A chord: two members and a callback, in workflow ``name``."""
    response = bulk(
        client,
        {"type": job_type, "workflow": name, "max_attempts": 1, "priority": 90},  # claimed first
        {"type": job_type, "workflow": name},
        {"type": job_type, "depends_on": [0, 1]},
    )
    assert response.status_code == 201
    return [result["job"] for result in response.get_json()["results"]]


def test_a_workflow_reads_its_jobs_and_counts(client, job_type):
    a, b, callback = graph(client, job_type)
    run(a["id"])
    body = client.get("/api/workflows/report-2026/").get_json()
    assert body["workflow"] == "report-2026"
    assert body["counts"] == {
        "queued": 1, "waiting": 1, "running": 0, "succeeded": 1, "failed": 0, "cancelled": 0,
    }  # fmt: skip
    assert (body["total"], body["counts_exact"], body["truncated"], body["jobs_max"]) == (3, True, False, 500)
    jobs = {job["id"]: job for job in body["jobs"]}
    assert set(jobs) == {a["id"], b["id"], callback["id"]}
    assert jobs[callback["id"]] == {
        "id": callback["id"], "type": job_type, "status": "queued", "state": "waiting",
        "depends_on": [a["id"], b["id"]], "on_parent_failure": "cancel", "waiting_on": 1,
        "finished_at": None,
    }  # fmt: skip
    assert jobs[a["id"]]["state"] == "succeeded" and jobs[a["id"]]["finished_at"] is not None
    assert client.get("/api/workflows/report%2D2026/").get_json() == body  # percent-encoded
    create(client, job_type, workflow="nächtlich lauf")
    spaced = client.get("/api/workflows/n%C3%A4chtlich%20lauf/").get_json()
    assert (spaced["workflow"], spaced["total"]) == ("nächtlich lauf", 1)


def test_a_large_workflow_lists_its_first_jobs_and_says_there_are_more(client, job_type):
    response = bulk(
        client, *({"type": job_type, "workflow": "big"} for _ in range(read_workflows.WORKFLOW_JOBS_CAP + 1))
    )
    assert response.status_code == 201
    body = client.get("/api/workflows/big/").get_json()
    assert (len(body["jobs"]), body["total"], body["truncated"]) == (500, 501, True)
    assert body["counts"]["queued"] == 501


@pytest.mark.parametrize("method", ["get", "post-cancel", "post-retry"])
def test_an_unknown_workflow_is_a_404_and_a_bad_id_a_400(client, job_type, method):
    suffix = {"get": "", "post-cancel": "cancel/", "post-retry": "retry/"}[method]
    call = client.get if method == "get" else client.post
    assert call(f"/api/workflows/nobody/{suffix}").status_code == 404
    for bad in ("w" * 121, "a%00b", "a%E2%80%AEb"):
        response = call(f"/api/workflows/{bad}/{suffix}")
        assert response.status_code == 400 and "workflow" in response.get_json()["errors"], bad


def test_cancel_and_retry_a_workflow_with_their_dry_runs(client, job_type):
    a, b, callback = graph(client, job_type)
    run(a["id"], ok=False)  # the callback is cancelled with its failed parent
    before = table_snapshot()
    dry = client.post("/api/workflows/report-2026/retry/?dry_run=true")
    assert dry.get_json() == {
        "workflow": "report-2026",
        "action": "retry",
        "dry_run": True,
        "count": 2,
        "exact": True,
    }
    dry = client.post("/api/workflows/report-2026/cancel/?dry_run=true")
    assert dry.get_json()["count"] == 1  # b, still queued
    assert table_snapshot() == before
    cancelled = client.post("/api/workflows/report-2026/cancel/")
    assert cancelled.status_code == 200 and cancelled.get_json()["count"] == 1
    gone = read_jobs.get_job(uuid.UUID(b["id"]))
    assert (gone.status, gone.last_error, gone.cancelled) == ("failed", "Cancelled by anonymous", True)
    event = read_jobs.job_events(gone.id)[-1]
    assert (event.type, audit(event.data)) == ("cancelled", {**ANONYMOUS_API, "workflow": "report-2026"})
    assert client.post("/api/workflows/report-2026/cancel/").get_json()["count"] == 0
    retried = client.post("/api/workflows/report-2026/retry/?dry_run=false")
    assert retried.get_json() == {
        "workflow": "report-2026", "action": "retry", "dry_run": False, "count": 3, "exact": True,
    }  # fmt: skip
    counts = client.get("/api/workflows/report-2026/").get_json()["counts"]
    assert (counts["queued"], counts["waiting"], counts["failed"], counts["cancelled"]) == (2, 1, 0, 0)
    event = read_jobs.job_events(uuid.UUID(callback["id"]))[-1]
    assert (event.type, audit(event.data)["workflow"]) == ("manual_retry", "report-2026")


def test_reading_a_workflow_needs_a_viewer_and_acting_on_it_an_operator(app, database_url, job_type):
    with build(database_url) as secured:
        client = secured.test_client()
        viewer = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
        operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        response = client.post("/api/jobs/", json={"type": job_type, "workflow": "w"}, headers=operator)
        assert response.status_code == 201
        assert client.get("/api/workflows/w/").status_code == 401
        assert client.get("/api/workflows/w/", headers=viewer).status_code == 200
        before = table_snapshot()
        for action in ("cancel", "retry"):
            for query in ("", "?dry_run=true"):
                refused = client.post(f"/api/workflows/w/{action}/{query}", headers=viewer)
                assert refused.status_code == 403
        assert table_snapshot() == before
        assert client.post("/api/workflows/w/cancel/", headers=operator).get_json()["count"] == 1
        event = read_jobs.job_events(uuid.UUID(response.get_json()["id"]))[-1]
        assert (event.type, event.data["actor"], event.data["source"]) == ("cancelled", "deploy", "api")


def test_the_schema_publishes_the_workflow_fields_and_endpoints(client):
    document = client.get("/api/schema/").get_json()
    create_props = document["components"]["schemas"]["CreateJob"]["properties"]
    assert create_props["on_parent_failure"]["anyOf"][0]["enum"] == list(PARENT_FAILURE_POLICIES)
    assert create_props["depends_on"]["anyOf"][0]["maxItems"] == PARENTS_MAX
    bulk_item = document["components"]["schemas"]["BulkCreateJob"]["properties"]["depends_on"]
    assert {"type": "integer", "minimum": 0, "maximum": 999} in bulk_item["anyOf"][0]["items"]["anyOf"]
    job = document["components"]["schemas"]["Job"]
    assert {"depends_on", "on_parent_failure", "workflow", "waiting_on"} <= set(job["required"])
    path = document["paths"]["/api/workflows/{workflow}/cancel/"]["post"]
    assert set(path["responses"]) == {"200", "400", "401", "403", "404", "503"}
    assert [p["name"] for p in path["parameters"]] == ["workflow", "dry_run"]
    assert path["parameters"][0]["schema"]["maxLength"] == 120
